// Package mdwrite is the one sticky-error writer the bench module's
// Markdown tables are printed through.
package mdwrite

import (
	"fmt"
	"io"
)

// Writer formats to W until a write fails, then skips every later write;
// Err is the first failure (nil: all written).
type Writer struct {
	W   io.Writer
	Err error
}

// Printf writes like fmt.Fprintf unless an earlier write failed.
func (w *Writer) Printf(format string, args ...any) {
	if w.Err == nil {
		_, w.Err = fmt.Fprintf(w.W, format, args...)
	}
}
