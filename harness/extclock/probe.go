package extclock

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Probe measures a host's wall clock as its processes see it: a small
// child process in the same clock environment (the same libfaketime state,
// the same Go clock page) that prints its wall-clock reading, in seconds
// (a decimal fraction), for each line it reads. Offset brackets each
// reading between two real-clock readings, so its error is at most half
// the round trip, which it reports.
type Probe struct {
	real generator.Clock

	mu     sync.Mutex
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	exited chan struct{}
}

// StartProbe starts argv with env as a probe on the real clock.
func StartProbe(real generator.Clock, argv, env []string) (*Probe, error) {
	if len(argv) == 0 {
		return nil, errors.New("extclock: empty probe command")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("extclock: starting probe %s: %w", argv[0], err)
	}
	p := &Probe{real: real, cmd: cmd, in: in, out: bufio.NewReader(out), exited: make(chan struct{})}
	go func() {
		cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// Offset returns the probe's wall reading minus real time, and the
// measurement's half-width. It takes the best of a few readings (the
// narrowest bracket) and fails after timeout.
func (p *Probe) Offset(ctx context.Context) (off, err time.Duration, e error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0, 0, errors.New("extclock: probe closed")
	}
	best := time.Duration(-1)
	for i := 0; i < 5; i++ {
		t0, _ := p.real.Now()
		w, err := p.readLocked(ctx)
		t1, _ := p.real.Now()
		if err != nil {
			return 0, 0, err
		}
		half := time.Duration(t1-t0) / 2
		if best < 0 || half < best {
			best, off = half, time.Duration(w-(t0+int64(half)))
		}
		if best < 50*time.Microsecond {
			break
		}
	}
	return off, best, nil
}

// readLocked asks for one reading, bounded by ctx and 5 s.
func (p *Probe) readLocked(ctx context.Context) (int64, error) {
	type res struct {
		line string
		err  error
	}
	ch := make(chan res, 1)
	go func() {
		if _, err := io.WriteString(p.in, "\n"); err != nil {
			ch <- res{err: err}
			return
		}
		line, err := p.out.ReadString('\n')
		ch <- res{line, err}
	}()
	t := time.NewTimer(5 * time.Second)
	defer t.Stop()
	select {
	case r := <-ch:
		if r.err != nil {
			return 0, fmt.Errorf("extclock: probe: %w", r.err)
		}
		return ParseSeconds(strings.TrimSpace(r.line))
	case <-p.exited:
		return 0, fmt.Errorf("extclock: probe exited (%s)", p.cmd.ProcessState)
	case <-t.C:
	case <-ctx.Done():
	}
	p.closeLocked() // the pipe is out of step now
	return 0, errors.New("extclock: probe did not answer within 5s")
}

// ParseSeconds parses a non-negative decimal number of seconds
// ("1767225600.123456") to Unix ns, exactly (no float rounding).
func ParseSeconds(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() < 0 || strings.ContainsAny(s, "eE/") || len(s) > 40 {
		return 0, fmt.Errorf("extclock: probe printed %q, want seconds such as 1767225600.123456", s)
	}
	r.Mul(r, big.NewRat(1e9, 1))
	n := new(big.Int).Quo(r.Num(), r.Denom())
	if !n.IsInt64() {
		return 0, fmt.Errorf("extclock: probe printed %q: out of range", s)
	}
	return n.Int64(), nil
}

// Close kills the probe.
func (p *Probe) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closeLocked()
}

func (p *Probe) closeLocked() {
	if p.cmd == nil {
		return
	}
	p.cmd.Process.Kill()
	<-p.exited
	p.cmd = nil
}

// PID returns the probe's process ID (0 once closed).
func (p *Probe) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Agrees reads the process's offset through p and reports an error unless
// it matches h's model within tol plus half the probe's round trip (plus
// the lead a held freeze stands ahead by, Host.Lead). The model is read on
// both sides of the probe, since under a freeze it falls with real time;
// the reading must lie between.
func (p *Probe) Agrees(ctx context.Context, h *Host, tol time.Duration) (time.Duration, error) {
	tol += h.Lead()
	before := h.Clock.Offset()
	got, half, err := p.Offset(ctx)
	if err != nil {
		return 0, err
	}
	after := h.Clock.Offset()
	lo, hi := min(before, after), max(before, after)
	if got > hi+tol+half || got < lo-tol-half {
		return got, fmt.Errorf("the process reads offset %v (±%v), the model %v to %v", got, half, before, after)
	}
	return got, nil
}
