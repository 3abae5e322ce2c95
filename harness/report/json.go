package report

import (
	"encoding/json"
	"io"

	"github.com/snowchaos/snowchaos/harness"
)

// JSON writes the report as indented JSON. Durations are in seconds (keys
// end in _seconds); IDs are strings. In simulated mode the same seed and
// scenarios give byte-identical output.
func JSON(w io.Writer, rep *harness.Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}
