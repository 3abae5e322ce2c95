package main

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// startMark is the stored high-water mark a new generator must wait out.
type startMark struct {
	// Ms is the mark, Unix ms (0: none).
	Ms int64
	// Source names where it is stored: "--checkpoint PATH" or the lease.
	Source string
	// Hold is how long from now until the clock passes it (<= 0: none).
	Hold time.Duration
}

// checkStartMark describes the mark markMs (from source) a generator with
// layout l loaded at wall time now (Unix ns). A mark at or beyond the last
// tick of the layout's lifetime is an error naming the source and the
// value: no ID could ever follow it.
func checkStartMark(l generator.Layout, markMs int64, source string, now int64) (startMark, error) {
	m := startMark{Ms: markMs, Source: source}
	if markMs <= 0 {
		return m, nil
	}
	markNs := markMs * int64(time.Millisecond) // the generator loaded it: in range
	if tick := l.TickOf(markNs); tick >= l.MaxTicks() {
		return m, fmt.Errorf("%s holds the mark %d ms (%s), at or beyond the end of layout %s's lifetime (%s): no ID could ever follow it; "+
			"if the mark is wrong (a clock that ran far ahead, a persisted forward step), remove it",
			source, markMs, time.UnixMilli(markMs).UTC().Format(time.RFC3339Nano), l.Name, l.TimeOf(l.MaxTicks()+1).Format(time.RFC3339))
	}
	m.Hold = time.Duration(markNs - now)
	return m, nil
}

// log says how long the mark holds the node and why: at WARN when the
// hold is longer than the generator's wait bound (every call refuses and
// the node is not ready until then), at INFO when calls wait it out.
func (m startMark) log(log *slog.Logger, maxWait time.Duration) {
	if m.Hold <= 0 {
		return
	}
	until := time.UnixMilli(m.Ms).UTC().Format(time.RFC3339Nano)
	why := "IDs up to the mark may have been issued before this start (a restart within the reservation, a clock that ran ahead, a persisted forward step)"
	if m.Hold <= maxWait {
		log.Info("stored mark: the first IDs wait until the clock passes it", "until", until, "for", m.Hold.Round(time.Millisecond), "source", m.Source)
		return
	}
	log.Warn("stored mark holds the node: no ID, and not ready, until the clock passes it", "until", until, "for", m.Hold.Round(time.Millisecond),
		"source", m.Source, "why", why, "max_wait", maxWait)
}

// markSource names where the loaded mark markMs is stored: the checkpoint
// file when it holds that mark, else the lease store.
func markSource(f *serveFlags, markMs int64) string {
	if f.checkpoint != "" {
		if fileMs, err := generator.NewFileCheckpoint(f.checkpoint).Load(); err == nil && fileMs == markMs {
			return "--checkpoint " + f.checkpoint
		}
	}
	return "the lease store"
}

// wallNow reads c's wall clock.
func wallNow(c generator.Clock) int64 {
	w, _ := c.Now()
	return w
}
