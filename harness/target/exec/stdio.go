package exec

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness/target"
)

// The stdio protocol, strictly: the harness writes a request line ("N",
// or the exec block's request); the process answers N lines, each an ID
// of the declared kind, or fewer followed by one "refused: ..." or
// "error: ..." line, which ends the answer. The time request ("time") is
// answered by one line, the process's clock reading. Anything else is a
// protocol violation: a line that is neither, a line over 64 KiB, output
// no request asked for (an answer with more lines than asked: it shows
// before the next request, or when the process ends).

// exchange writes one request line and reads its answer into dst.
func (n *node) exchange(ctx context.Context, p *proc, dst ids) (int, error) {
	p.io.Lock()
	defer p.io.Unlock()
	if err := n.ready(p); err != nil {
		return 0, err
	}
	count := dst.len()
	req := n.expand(n.x.Request, p.port, count)
	timer := time.NewTimer(n.x.Timeout)
	defer timer.Stop()
	if err := p.write(req, n.x.Timeout); err != nil {
		return 0, n.hung(p, fmt.Errorf("exec: node %s: writing the request: %w", n.spec.Name, err))
	}
	for i := range count {
		l, err := p.next(timer.C, ctx.Done(), n.spec.Name, n.x.Timeout)
		if err != nil {
			return i, n.hung(p, err)
		}
		if l.long {
			return i, n.violate(p, fmt.Sprintf("line %d of the answer to %q is longer than %d bytes (it starts %q)", i+1, req, maxLine, clip(l.text)))
		}
		if msg, ok := answerError(l.text); ok {
			if strings.HasPrefix(msg, "refused") {
				return i, fmt.Errorf("%w: exec: node %s %s", target.ErrRefused, n.spec.Name, msg)
			}
			return i, fmt.Errorf("exec: node %s %s", n.spec.Name, msg)
		}
		v, err := ParseID(n.kind, l.text)
		if err != nil {
			return i, n.violate(p, fmt.Sprintf("line %d of the answer to %q (%d asked for) is not a %s ID nor a refused:/error: line: %v", i+1, req, count, n.kind, err))
		}
		dst.put(i, v)
	}
	return count, nil
}

// ready returns why process p cannot take a request now: it stopped
// serving, or it wrote output nobody asked for (a violation).
func (n *node) ready(p *proc) error {
	if err := p.usable(); err != nil {
		return err
	}
	if l, ok := p.unasked(); ok {
		return n.violate(p, fmt.Sprintf("the process wrote %q while no request was waiting: an earlier answer had more lines than asked for", clip(l.text)))
	}
	return nil
}

// hung handles a request that got no complete answer: the process is out
// of step with its requests and goes (ErrHung); an exited process is
// reported as it is.
func (n *node) hung(p *proc, err error) error {
	if errors.Is(err, ErrHung) {
		p.markDown(fmt.Sprintf("process %d was killed: a request got no answer within %s", p.pid(), n.x.Timeout))
		p.kill()
		n.cleanup(p)
	}
	return err
}

// answerError recognises a "refused: ..." or "error: ..." answer line.
func answerError(s string) (string, bool) {
	for _, pre := range []string{"refused:", "error:"} {
		if strings.HasPrefix(s, pre) {
			return strings.TrimSuffix(pre, ":") + ": " + strings.TrimSpace(s[len(pre):]), true
		}
	}
	return "", false
}

// reading is one clock reading of a process: its wall clock (Unix ns, at
// the resolution it printed) taken somewhere between t0 and t1 (real).
type reading struct {
	wall   int64
	res    time.Duration
	t0, t1 int64
}

// mid is the real time in the middle of the reading's interval.
func (r reading) mid() int64 { return r.t0 + (r.t1-r.t0)/2 }

// offset returns the reading's offset from real time and its half-width:
// the interval [t0, t1] and the printed resolution together.
func (r reading) offset() (off, half time.Duration) {
	return time.Duration(r.wall + int64(r.res)/2 - r.mid()), time.Duration(r.t1-r.t0)/2 + r.res/2
}

// reading asks process p for its clock reading, waiting at most wait.
func (n *node) reading(ctx context.Context, p *proc, wait time.Duration) (reading, error) {
	if !n.stdio() {
		return n.readingHTTP(ctx, p, wait)
	}
	p.io.Lock()
	defer p.io.Unlock()
	if err := n.ready(p); err != nil {
		return reading{}, err
	}
	req := n.expand(n.x.TimeRequest, p.port, 0)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	t0, _ := realClock.Now()
	if err := p.write(req, wait); err != nil {
		return reading{}, fmt.Errorf("%w: exec: node %s: writing %q: %v", ErrHung, n.spec.Name, req, err)
	}
	l, err := p.next(timer.C, ctx.Done(), n.spec.Name, wait)
	t1, _ := realClock.Now()
	if err != nil {
		return reading{}, err
	}
	if l.long {
		return reading{}, fmt.Errorf("%w: a line longer than %d bytes", ErrNotReading, maxLine)
	}
	wall, res, err := ParseReading(l.text)
	if err != nil {
		return reading{}, err
	}
	return reading{wall: wall, res: res, t0: t0, t1: t1}, nil
}
