// Package proclog holds what the harness's process-running targets and
// stores share about a child process's output.
package proclog

import (
	"io"
	"strings"
	"sync"
)

// TailSize is how many bytes of output a Tail keeps.
const TailSize = 8 << 10

// Tail keeps the last TailSize bytes written to it, for error messages,
// and copies each line, after Prefix, to Out when Out is set. It is safe
// for concurrent use; the zero value keeps and copies nothing else.
type Tail struct {
	// Prefix goes before each line copied to Out.
	Prefix string
	// Out, when set, gets a copy of every line written.
	Out io.Writer

	mu  sync.Mutex
	buf []byte
}

// Write implements io.Writer; it never fails.
func (t *Tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > TailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-TailSize:]...)
	}
	if t.Out != nil {
		for _, line := range strings.SplitAfter(string(p), "\n") {
			if line != "" {
				io.WriteString(t.Out, t.Prefix+line)
			}
		}
	}
	return len(p), nil
}

// String returns the kept output.
func (t *Tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
