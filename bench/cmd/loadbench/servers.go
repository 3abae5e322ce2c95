package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/yieldclock"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/server"
)

// benchServers are the addresses of the servers loadbench measures, all
// in one child process (so they share its CPU binding, GOMAXPROCS and
// garbage collector): the nodes and the references: two bare servers
// answering every /v1/id with a constant ID and every /v1/ids with a
// constant body of --batch IDs, in the node's formats and headers, and a
// node whose generator waits for the next tick in a loop of
// runtime.Gosched below 1 ms (yieldclock.Sleep), the batch phase's
// reference for the CPU a wait costs.
type benchServers struct {
	Nodes      []string `json:"nodes"`      // base URLs of the nodes
	NetHTTP    string   `json:"net_http"`   // the net/http reference
	FastHTTP   string   `json:"fasthttp"`   // the fasthttp reference
	YieldNode  string   `json:"yield_node"` // the node waiting in a yield loop
	Control    string   `json:"control"`    // GET /cpu: the process's CPU time
	GOMAXPROCS int      `json:"gomaxprocs"`
	Pinned     int      `json:"pinned"` // the CPU the process is bound to, -1 none
}

// processCPU is the CPU time this process has used (user + system).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// yieldClock is the system clock sleeping in a yield loop
// (yieldclock.Sleep): the reference node's clock.
type yieldClock struct{ generator.Clock }

func (yieldClock) Sleep(d time.Duration) { yieldclock.Sleep(d) }

// constBodies are the reference servers' answers.
type constBodies struct {
	one, oneJSON, batch, batchJSON []byte
}

// newConstBodies encodes one ID and a batch of n as the node would.
func newConstBodies(n int) (constBodies, error) {
	g, err := generator.New(generator.Settings{Node: 1})
	if err != nil {
		return constBodies{}, err
	}
	defer g.Close()
	ids := make([]generator.ID, n)
	if got, err := g.NextN(ids); err != nil {
		return constBodies{}, fmt.Errorf("%d of %d IDs: %w", got, n, err)
	}
	return constBodies{
		one:       server.AppendIDList(nil, ids[:1], false),
		oneJSON:   []byte(`{"id":"` + ids[0].String() + "\"}\n"),
		batch:     server.AppendIDList(nil, ids, false),
		batchJSON: server.AppendIDList(nil, ids, true),
	}, nil
}

// pick returns the body for a path and whether JSON was asked for.
func (b constBodies) pick(path string, asJSON bool) []byte {
	switch {
	case path == "/v1/ids" && asJSON:
		return b.batchJSON
	case path == "/v1/ids":
		return b.batch
	case asJSON:
		return b.oneJSON
	}
	return b.one
}

// contentType is the node's content type for a body.
func contentType(asJSON bool) string {
	if asJSON {
		return "application/json"
	}
	return "text/plain; charset=utf-8"
}

// runBenchServers starts the nodes and references on loopback, writes
// their addresses as one JSON line to stdout and serves until stdin closes
// (the parent ended) or ctx is done.
func runBenchServers(ctx context.Context, nodes, batch, pin int, stdin io.Reader, stdout io.Writer) error {
	out := benchServers{Pinned: -1}
	if pin >= 0 {
		if err := pinProcess(pin); err != nil {
			return err
		}
		out.Pinned = pin
	}
	out.GOMAXPROCS = runtime.GOMAXPROCS(0)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { io.Copy(io.Discard, stdin); cancel() }()
	listen := func() (net.Listener, string, error) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, "", err
		}
		return ln, "http://" + ln.Addr().String(), nil
	}
	var stops []func()
	defer func() {
		for _, s := range stops {
			s()
		}
	}()
	// startNode starts a node for worker on clock (nil: the system clock).
	startNode := func(worker int64, clock generator.Clock) (string, error) {
		nd, err := node.New(ctx, node.Config{Settings: generator.Settings{Node: worker, Clock: clock}})
		if err != nil {
			return "", err
		}
		stop := func() { nd.Stop(context.WithoutCancel(ctx), true) }
		srv, err := server.New(server.Config{Node: nd, MaxBatch: max(batch, server.DefaultMaxBatch), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			stop()
			return "", err
		}
		ln, url, err := listen()
		if err != nil {
			stop()
			return "", err
		}
		sctx, scancel := context.WithCancel(context.WithoutCancel(ctx))
		done := make(chan struct{})
		go func() { defer close(done); srv.Serve(sctx, ln, nil) }()
		stops = append(stops, func() { scancel(); <-done; stop() })
		return url, nil
	}
	for i := range nodes {
		url, err := startNode(int64(i+1), nil)
		if err != nil {
			return err
		}
		out.Nodes = append(out.Nodes, url)
	}
	// Its own worker ID, above the nodes': its IDs are never compared
	// with theirs, but a reader of the rows should not wonder.
	yield, err := startNode(int64(nodes+1), yieldClock{generator.SystemClock()})
	if err != nil {
		return err
	}
	out.YieldNode = yield
	bodies, err := newConstBodies(batch)
	if err != nil {
		return err
	}
	// The references: default settings, the node's bodies and headers.
	ln, url, err := listen()
	if err != nil {
		return err
	}
	nh := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
		b := bodies.pick(r.URL.Path, asJSON)
		h := w.Header()
		h.Set("Content-Type", contentType(asJSON))
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Length", strconv.Itoa(len(b)))
		w.Write(b)
	})}
	go nh.Serve(ln)
	stops = append(stops, func() { nh.Close() })
	out.NetHTTP = url
	if ln, url, err = listen(); err != nil {
		return err
	}
	fh := &fasthttp.Server{NoDefaultServerHeader: true, Handler: func(c *fasthttp.RequestCtx) {
		asJSON := strings.Contains(string(c.Request.Header.Peek("Accept")), "application/json")
		c.Response.Header.Set("Content-Type", contentType(asJSON))
		c.Response.Header.Set("Cache-Control", "no-store")
		c.SetBody(bodies.pick(string(c.Path()), asJSON))
	}}
	go fh.Serve(ln)
	stops = append(stops, func() { fh.Shutdown() })
	out.FastHTTP = url
	if ln, url, err = listen(); err != nil {
		return err
	}
	ch := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintf(w, "%d\n", processCPU().Nanoseconds())
	})}
	go ch.Serve(ln)
	stops = append(stops, func() { ch.Close() })
	out.Control = url
	if err := json.NewEncoder(stdout).Encode(out); err != nil {
		return err
	}
	<-ctx.Done()
	return nil
}

// selfCommand runs this program with args (tests substitute the test
// binary's way of running main).
var selfCommand = func(args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return exec.Command(exe, args...), nil
}

// serverProcess is the child process running the bench servers.
type serverProcess struct {
	benchServers
	cmd   *exec.Cmd
	stdin io.Closer
	hc    *http.Client
}

// startBenchServers starts the child process and reads its addresses
// (within 30 s).
func startBenchServers(nodes, batch, pin int, stderr io.Writer) (*serverProcess, error) {
	cmd, err := selfCommand("--server-process", "--nodes", strconv.Itoa(nodes), "--batch", strconv.Itoa(batch), "--pin-server", strconv.Itoa(pin))
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &serverProcess{cmd: cmd, stdin: stdin, hc: &http.Client{Timeout: 10 * time.Second}}
	line := make(chan error, 1)
	go func() {
		l, err := bufio.NewReader(stdout).ReadBytes('\n')
		if err == nil {
			err = json.Unmarshal(l, &p.benchServers)
		}
		line <- err
		io.Copy(io.Discard, stdout)
	}()
	select {
	case err = <-line:
	case <-time.After(30 * time.Second):
		err = errors.New("no addresses within 30 s")
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("starting the bench servers: %w", err)
	}
	return p, nil
}

// cpu returns the CPU time the server process has used.
func (p *serverProcess) cpu() (time.Duration, error) {
	resp, err := p.hc.Get(p.Control + "/cpu")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	if err != nil {
		return 0, err
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(ns), err
}

// stop ends the child (closing its stdin; killed after 10 s).
func (p *serverProcess) stop() {
	p.stdin.Close()
	done := make(chan struct{})
	go func() { p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
	}
}

// runtimeProcs is GOMAXPROCS.
func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
