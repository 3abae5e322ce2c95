package exec

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// Sniffed is what a command showed of itself in a short session with no
// fault: what snowchaos check assumes from.
type Sniffed struct {
	// Ready is the last line a stdio process printed before it fell
	// silent, waiting for requests ("" when it printed nothing).
	Ready string
	// StartTime is how long it took from exec to that line (or to the
	// port, over HTTP; to its first answer without either).
	StartTime time.Duration
	// IDs are its answer to a request for three IDs; IDsAt the real time
	// (Unix ns) the last of them arrived.
	IDs   []string
	IDsAt int64
	// Refused is its refusal line, when it refused that request.
	Refused string
	// Time is its answer to the time request; TimeErr why it gave none.
	Time    string
	TimeErr error
	// Reach is "" when the clock route's interposer is loaded in its
	// process group, else why no clock fault could reach it.
	Reach string
	// GoBinaries lists the Go programs running in its process group.
	GoBinaries []string
}

// sniffQuiet is how long a stdio process must stay silent after a line
// before the line counts as its ready line; sniffWait how long one that
// prints nothing is given before requests are sent.
const (
	sniffQuiet = 300 * time.Millisecond
	sniffWait  = 2 * time.Second
)

// Sniff starts x's command once as node worker, under its clock route with
// no fault, and reports what it showed: its ready line, how long it took
// to start, three IDs (text as answered, not yet parsed), its answer to
// the time request, whether the route reaches it and the Go binaries in
// its group. Without x.Ready the ready line is found out: the last line
// the process printed before it fell silent, or, when it printed its first
// line only after the request came, a line that is no ID before three that
// are. x.ID need not be right (the IDs are returned as text).
func Sniff(ctx context.Context, x *scenario.Exec, worker int64) (Sniffed, error) {
	c := *x
	c.Time = scenario.TimeOff
	given := c.Ready
	if c.TimeRequest == "" {
		c.TimeRequest = "time"
	}
	dir, err := os.MkdirTemp(hostDir(), "snowchaos-sniff-")
	if err != nil {
		return Sniffed{}, err
	}
	spec := target.NodeSpec{Name: "sniff", Host: "sniff", Worker: worker, Layout: generator.DefaultLayout(), Exec: &c}
	n := &node{spec: spec, x: &c, kind: verify.KindString, dir: dir}
	n.mu.worker = -1
	defer n.Close()
	if err := n.setup(ctx, &Registered().builds); err != nil {
		return Sniffed{}, err
	}
	n.mu.Lock()
	p, err := n.startLocked(ctx)
	n.mu.Unlock()
	if err != nil {
		return Sniffed{}, err
	}
	n.mu.Lock()
	n.mu.p = p
	n.mu.Unlock()
	var s Sniffed
	readyAt := nowNs()
	switch {
	case given != "":
		s.Ready = given
	case n.stdio():
		s.Ready, readyAt = sniffReady(p, c.StartTimeout)
	}
	s.StartTime = time.Duration(readyAt - p.started)
	early := s.Ready
	if err := sniffIDs(ctx, n, p, &s); err != nil {
		return s, err
	}
	if early == "" && n.stdio() {
		// No line before the first request: started once it answered.
		s.StartTime = time.Duration(s.IDsAt - p.started)
	}
	members := groupMembers(p.pid())
	for _, m := range members {
		if m.exe == "" {
			continue
		}
		if ok, v := goclock.IsGoBinary(m.exe); ok {
			s.GoBinaries = append(s.GoBinaries, fmt.Sprintf("%s (pid %d, built by %s)", m.exe, m.pid, v))
		}
	}
	s.Reach = n.reachOf(p)
	if n.stdio() || c.TimeURL != "" {
		r, err := n.reading(ctx, p, sniffWait)
		switch {
		case err == nil:
			s.Time = time.Unix(0, r.wall).UTC().Format(time.RFC3339Nano)
		default:
			s.TimeErr = err
		}
	}
	return s, nil
}

// sniffReady waits for a stdio process's output to start and then to fall
// silent for sniffQuiet, and returns its last line, the line it prints
// once it takes requests, and when it came. Nothing within sniffWait (or
// start) means no ready line.
func sniffReady(p *proc, start time.Duration) (string, int64) {
	wait := time.NewTimer(min(start, sniffWait))
	defer wait.Stop()
	last, at := "", nowNs()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				return last, at
			}
			last, at = l.text, nowNs()
			wait.Reset(sniffQuiet)
		case <-wait.C:
			return last, at
		}
	}
}

// sniffIDs asks the process for three IDs, as text.
func sniffIDs(ctx context.Context, n *node, p *proc, s *Sniffed) error {
	const count = 3
	if !n.stdio() {
		u := n.expand(n.x.URL, p.port, count)
		status, body, err := n.get(ctx, p, u)
		if err != nil {
			return err
		}
		if status != http.StatusOK {
			s.Refused = fmt.Sprintf("%s answered %d: %.200s", u, status, body)
			return nil
		}
		got, err := ParseResponse(n.x.Format, n.x.Field, body)
		if err != nil {
			return fmt.Errorf("%s answered 200 with %q: %w", u, clip(string(body)), err)
		}
		s.IDs, s.IDsAt = got, nowNs()
		return nil
	}
	req := n.expand(n.x.Request, p.port, count)
	timer := time.NewTimer(n.x.Timeout)
	defer timer.Stop()
	if err := p.write(req, n.x.Timeout); err != nil {
		return fmt.Errorf("writing %q: %w", req, err)
	}
	var lines []string
	for len(lines) < count {
		l, err := p.next(timer.C, ctx.Done(), n.spec.Name, n.x.Timeout)
		if err != nil {
			return fmt.Errorf("asked for %d IDs (%q): %w; stderr:\n%s", count, req, err, p.stderr.String())
		}
		if msg, ok := answerError(l.text); ok {
			s.Refused = msg
			return nil
		}
		lines = append(lines, strings.TrimSpace(l.text))
		s.IDsAt = nowNs()
		// A line that is no ID before lines that are: a ready line the
		// process printed only once the request came (a slow start).
		if len(lines) == count && s.Ready == "" && !idLike(lines[0]) && idLike(lines[1]) {
			late := time.NewTimer(sniffQuiet)
			select {
			case l, ok := <-p.lines:
				if ok && idLike(strings.TrimSpace(l.text)) {
					s.Ready, lines = lines[0], append(lines[1:], strings.TrimSpace(l.text))
					s.IDsAt = nowNs()
				}
			case <-late.C:
			}
			late.Stop()
		}
	}
	s.IDs = lines
	return nil
}

// idLike reports whether a line looks like an ID of a kind the harness
// knows (a decimal Snowflake, a UUID, a ULID): what a ready line is not.
func idLike(s string) bool {
	if _, err := verify.ParseSnowflake(s); err == nil {
		return true
	}
	for _, k := range []verify.Kind{verify.KindUUID, verify.KindULID} {
		if _, err := verify.Parse128(k, s); err == nil {
			return true
		}
	}
	return false
}

// nowNs reads the real wall clock.
func nowNs() int64 { w, _ := realClock.Now(); return w }
