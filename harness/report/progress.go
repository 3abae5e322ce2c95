package report

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/harness"
)

// Progress prints a one-line live status to a terminal, rewriting it in
// place: the run, its elapsed (simulated or real) time, IDs checked,
// duplicates so far and the fault windows open now. now is the wall
// clock, used only to throttle redraws to about ten a second.
type Progress struct {
	w     io.Writer
	now   func() time.Time
	total int

	mu struct {
		sync.Mutex
		last  time.Time
		done  int
		width int
	}
}

// NewProgress returns a progress line on w for a suite of total runs.
func NewProgress(w io.Writer, total int, now func() time.Time) *Progress {
	return &Progress{w: w, now: now, total: total}
}

// Update is a harness.Options.Progress callback.
func (p *Progress) Update(s harness.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.Final {
		p.mu.done++
	}
	t := p.now()
	if !s.Final && t.Sub(p.mu.last) < 100*time.Millisecond {
		return
	}
	p.mu.last = t
	faults := "-"
	if len(s.Faults) > 0 {
		faults = strings.Join(s.Faults, ",")
	}
	pct := 0.0
	if s.Duration > 0 {
		pct = 100 * float64(s.Elapsed) / float64(s.Duration)
	}
	line := fmt.Sprintf("[%d/%d] %s / %s  %5.1f%% of %s  ids %d  dups %d  faults %s",
		p.mu.done, p.total, s.Scenario, s.Target, pct, harness.Duration(s.Duration), s.IDs, s.Duplicates, faults)
	pad := max(p.mu.width-len(line), 0)
	p.mu.width = len(line)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
}

// Clear erases the progress line.
func (p *Progress) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.mu.width > 0 {
		fmt.Fprintf(p.w, "\r%s\r", strings.Repeat(" ", p.mu.width))
		p.mu.width = 0
	}
}
