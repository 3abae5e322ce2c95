package exec

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	osexec "os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/snowchaos/snowchaos/harness/proclog"
	"github.com/snowchaos/snowchaos/harness/target"
)

// maxLine bounds one line of a process's answer.
const maxLine = 64 << 10

// lineBuffer is how many answer lines the reader keeps ahead of the
// requests: past it, the reader stops reading and the process blocks on
// its writes.
const lineBuffer = 1024

// proc is one running process of a node.
type proc struct {
	idx     int // the node's process number: 0, then one up per restart
	cmd     *osexec.Cmd
	exited  chan struct{}
	stderr  proclog.Tail
	port    int
	started int64 // real Unix ns at which exec returned

	// down, once set, says why the process no longer serves (a protocol
	// violation, a hung request): calls fail at once with it.
	down atomic.Pointer[string]
	// reached is set once the route's interposer was seen mapped in the
	// process's group (a library once loaded stays loaded).
	reached atomic.Bool
	// stopped is set when the harness stops the process (a restart, the
	// end of the run): a call it cuts short found the node going down.
	stopped atomic.Bool

	// stdio
	io    sync.Mutex // one exchange at a time
	in    *os.File   // the process's stdin (write end, with deadlines)
	out   *os.File   // its stdout (read end)
	lines chan line  // stdout, line by line; closed at EOF

	// http
	client *http.Client
}

// line is one line of a process's standard output, without its end.
type line struct {
	text string
	long bool // longer than maxLine: text holds its start
}

// newProc prepares a process for argv with env in dir; stdio wires its
// standard input and output to the node.
func newProc(idx int, argv, env []string, dir string, stdio bool, timeout time.Duration) (*proc, *os.File, *os.File, error) {
	cmd := osexec.Command(argv[0], argv[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its children die with it
	p := &proc{idx: idx, cmd: cmd, exited: make(chan struct{})}
	cmd.Stderr = &p.stderr
	if !stdio {
		p.client = &http.Client{Timeout: timeout, Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}}
		return p, nil, nil, nil
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, nil, nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return nil, nil, nil, err
	}
	cmd.Stdin, cmd.Stdout = inR, outW
	p.in, p.out = inW, outR
	p.lines = make(chan line, lineBuffer)
	return p, inR, outW, nil
}

// start starts the process; childEnds are the pipe ends the child holds,
// closed here once it has them.
func (p *proc) start(childEnds ...*os.File) error {
	err := p.cmd.Start()
	for _, f := range childEnds {
		if f != nil {
			f.Close()
		}
	}
	if err != nil {
		if p.in != nil {
			p.in.Close()
			p.out.Close()
		}
		return err
	}
	p.started, _ = realClock.Now()
	go func() {
		p.cmd.Wait()
		close(p.exited)
	}()
	if p.lines != nil {
		go p.read()
	}
	return nil
}

// read delivers the process's standard output, line by line, until EOF
// (every process holding the pipe has exited) or until the read end is
// closed. A line longer than maxLine is delivered as its start, marked.
func (p *proc) read() {
	defer close(p.lines)
	br := bufio.NewReaderSize(p.out, maxLine)
	for {
		b, err := br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			head := string(b[:128])
			for errors.Is(err, bufio.ErrBufferFull) {
				_, err = br.ReadSlice('\n')
			}
			p.lines <- line{text: head, long: true}
			if err != nil {
				return
			}
			continue
		}
		if len(b) > 0 {
			p.lines <- line{text: strings.TrimRight(string(b), "\r\n")}
		}
		if err != nil {
			return
		}
	}
}

// pid returns the process's ID.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// usable returns why the process no longer serves, or nil.
func (p *proc) usable() error {
	if why := p.down.Load(); why != nil {
		return fmt.Errorf("%w: %s", target.ErrStopped, *why)
	}
	if p.stopped.Load() {
		return fmt.Errorf("%w: process %d was stopped by the harness", target.ErrStopped, p.pid())
	}
	select {
	case <-p.exited:
		return fmt.Errorf("process %d exited (%s); stderr:\n%s", p.pid(), p.cmd.ProcessState, p.stderr.String())
	default:
	}
	return nil
}

// markDown records why the process stops serving (the first reason wins).
func (p *proc) markDown(why string) {
	p.down.CompareAndSwap(nil, &why)
}

// kill sends SIGKILL to the process's group, waits for it and returns the
// standard output it left unread (lines no request was waiting for),
// bounded: a descendant outside the group that keeps the pipe open does
// not hold it up.
func (p *proc) kill() (leftover []string, n int) {
	syscall.Kill(-p.pid(), syscall.SIGKILL)
	<-p.exited
	return p.drain()
}

// drain reads what remains of the process's standard output once it has
// exited: at most a couple of seconds, then the read end is closed.
func (p *proc) drain() (leftover []string, n int) {
	if p.lines == nil {
		return nil, 0
	}
	if p.in != nil {
		p.in.Close()
	}
	t := time.NewTimer(2 * time.Second)
	defer t.Stop()
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.out.Close()
				return leftover, n
			}
			if n < 3 {
				leftover = append(leftover, clip(l.text))
			}
			n++
		case <-t.C:
			p.out.Close() // the reader ends at its next read
			for l := range p.lines {
				if n < 3 {
					leftover = append(leftover, clip(l.text))
				}
				n++
			}
			return leftover, n
		}
	}
}

// next returns the process's next output line, waiting until timer fires
// or done is closed (then the process is out of step: ErrHung). At EOF it
// says how the process ended.
func (p *proc) next(timer <-chan time.Time, done <-chan struct{}, node string, timeout time.Duration) (line, error) {
	select {
	case l, ok := <-p.lines:
		if ok {
			return l, nil
		}
		select {
		case <-p.exited:
		case <-time.After(time.Second):
		}
		if p.stopped.Load() {
			// The harness stopped it (a restart's kill -9) during the call.
			return line{}, fmt.Errorf("%w: exec: node %s: process %d was stopped by the harness during the call", target.ErrStopped, node, p.pid())
		}
		return line{}, fmt.Errorf("exec: node %s: process %d closed its output (%s); stderr:\n%s", node, p.pid(), p.cmd.ProcessState, p.stderr.String())
	case <-timer:
	case <-done:
	}
	return line{}, fmt.Errorf("%w (node %s, %s)", ErrHung, node, timeout)
}

// unasked returns output the process sent while no request waited for
// it, without blocking: a line there means an earlier answer had more
// lines than asked for (or the process writes what is no answer).
func (p *proc) unasked() (line, bool) {
	select {
	case l, ok := <-p.lines:
		return l, ok
	default:
		return line{}, false
	}
}

// write writes one request line to the process's standard input, within
// timeout (a process that stops reading its input must not hold a call).
func (p *proc) write(s string, timeout time.Duration) error {
	p.in.SetWriteDeadline(time.Now().Add(timeout))
	_, err := io.WriteString(p.in, s+"\n")
	return err
}
