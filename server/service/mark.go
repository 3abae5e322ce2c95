package service

import (
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/node"
)

// checkStartMark checks the stored mark the node loaded and says at start
// how long it holds the node, and why. A mark at or beyond the last tick
// of the layout's lifetime is ErrStartMark, naming where it is stored and
// its value: no ID could ever follow it. A mark ahead of the clock is
// logged at INFO when the generator waits it out within MaxWait, at WARN
// when longer (every call refuses and /readyz says not ready until the
// clock passes it); a mark behind the clock (a fresh start's none, a
// graceful stop's last tick) is not logged.
func (s *Service) checkStartMark(cfg Config) error {
	m := s.node.StartMark()
	if m.Ms <= 0 {
		return nil
	}
	st := s.node.Settings()
	l := st.Layout
	source := "the lease store " + s.storeURL()
	if m.Source == node.MarkFromCheckpoint {
		source = "the checkpoint file " + cfg.CheckpointPath
	}
	until := time.UnixMilli(m.Ms).UTC().Format(time.RFC3339Nano)
	if l.TickOf(m.Ms*int64(time.Millisecond)) >= l.MaxTicks() {
		return fmt.Errorf("%w: %s holds the mark %d ms (%s), at or beyond the end of layout %s's lifetime (%s): no ID could ever follow it; "+
			"if the mark is wrong (a clock that ran far ahead, a persisted forward step), remove it",
			ErrStartMark, source, m.Ms, until, l.Name, l.TimeOf(l.MaxTicks()+1).Format(time.RFC3339))
	}
	if !m.Holds() {
		return nil
	}
	hold := m.Ahead.Round(time.Millisecond)
	if m.Ahead <= st.MaxWait {
		s.log.Info("stored mark: the first IDs wait until the clock passes it", "until", until, "for", hold, "source", source)
		return nil
	}
	s.log.Warn("stored mark holds the node: no ID, and not ready, until the clock passes it", "until", until, "for", hold,
		"source", source, "why", "IDs up to the mark may have been issued before this start (a restart within the reservation, a clock that ran ahead, a persisted forward step)",
		"max_wait", st.MaxWait)
	return nil
}

// storeURL is the lease store's URL, redacted.
func (s *Service) storeURL() string {
	if s.store == nil {
		return ""
	}
	return s.store.URL
}
