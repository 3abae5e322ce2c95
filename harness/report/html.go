package report

import (
	"io"

	"github.com/snowchaos/snowchaos/harness"
)

// HTML writes the report as one static page (placeholder until the SVG
// timeline lands).
func HTML(w io.Writer, rep *harness.Report) error { return nil }
