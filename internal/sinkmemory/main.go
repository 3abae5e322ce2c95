// Command sinkmemory measures the verification sink's memory per verified
// ID and its rate: a snowchaos verify child process is sent N Snowflake
// IDs over HTTP (several clients at once, each its share of the IDs in
// bodies of a few tens of MB, generated as they are sent), and its
// resident memory and CPU time are read from /proc. The reference, in the
// same run and before the sink, is a verify.Verifier fed the same IDs
// directly in this process (the heap it holds after a collection, and the
// CPU time, less that of making the IDs, measured alone in the same run);
// with -map-max, a plain Go map of the IDs as well.
//
//	go run ./internal/sinkmemory -bin bin/snowchaos -ids 1e8,1e9 -shapes dense,sparse
//
// Shapes (sinkload): dense is every sequence number of every ms (4,096
// per ms, the default layout's ceiling) from 4 nodes, node after node
// within a ms; sparse is one ID per ms from each of 1,024 nodes,
// interleaved ID by ID. make sink-memory runs it with nice.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
	"github.com/snowchaos/snowchaos/verify/sink/sinkload"
)

func main() {
	bin := flag.String("bin", "bin/snowchaos", "the snowchaos binary to measure")
	idsFlag := flag.String("ids", "1e8", "comma-separated ID counts (1e6..1e10)")
	shapesFlag := flag.String("shapes", "dense,sparse", "comma-separated shapes: dense, sparse")
	clients := flag.Int("clients", 4, "clients sending at once (1..64)")
	bodyMB := flag.Int("body-mb", 32, "body size, MB (1..64)")
	mapMax := flag.Float64("map-max", 1e8, "also measure a plain Go map of the IDs up to this many IDs (0: never)")
	flag.Parse()
	if err := run(*bin, *idsFlag, *shapesFlag, *clients, *bodyMB, int64(*mapMax)); err != nil {
		fmt.Fprintln(os.Stderr, "sinkmemory:", err)
		os.Exit(1)
	}
}

// shapeNodes is how many nodes each shape interleaves.
var shapeNodes = map[sinkload.Shape]int{sinkload.Dense: 4, sinkload.Sparse: 1024}

func run(bin, idsFlag, shapesFlag string, clients, bodyMB int, mapMax int64) error {
	var counts []int64
	for _, s := range strings.Split(idsFlag, ",") {
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 1e6 || f > 1e10 {
			return fmt.Errorf("-ids %q: want counts in 1e6..1e10", s)
		}
		counts = append(counts, int64(f))
	}
	var shapes []sinkload.Shape
	for _, s := range strings.Split(shapesFlag, ",") {
		sh, err := sinkload.ParseShape(s)
		if err != nil {
			return err
		}
		shapes = append(shapes, sh)
	}
	if clients < 1 || clients > 64 || bodyMB < 1 || bodyMB > 64 {
		return errors.New("-clients: want 1..64, -body-mb: 1..64")
	}
	fmt.Printf("go %s, GOMAXPROCS %d, load average at the start %s\n", runtime.Version(), runtime.GOMAXPROCS(0), sinkload.LoadAverage())
	fmt.Printf("sink: %s verify --listen, %d clients, bodies of %d MB; reference: verify.Verifier in process, its CPU time less making the IDs\n\n", bin, clients, bodyMB)
	fmt.Println("| shape | IDs | sink RSS growth | per ID | sink peak RSS | sink CPU | CPU ns/ID | IDs/s per CPU | wall | Verifier heap | per ID | Verifier CPU ns/ID | sink/Verifier CPU | map bytes/ID | map CPU ns/ID | load (1 min) |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, sh := range shapes {
		for _, n := range counts {
			spec := sinkload.Spec{Shape: sh, Nodes: shapeNodes[sh]}
			gen, err := makeCPU(spec, n)
			if err != nil {
				return err
			}
			ref, err := reference(spec, n)
			if err != nil {
				return err
			}
			ref.cpu -= gen
			mapRef := "n/a"
			mapCPU := "n/a"
			if n <= mapMax {
				m, err := mapReference(spec, n)
				if err != nil {
					return err
				}
				mapRef = fmt.Sprintf("%.1f", float64(m.heap)/float64(n))
				mapCPU = fmt.Sprintf("%.0f", float64((m.cpu-gen).Nanoseconds())/float64(n))
			}
			sk, err := measureSink(bin, spec, n, clients, bodyMB)
			if err != nil {
				return err
			}
			growth := int64(sk.end.RSS) - int64(sk.before.RSS)
			fmt.Printf("| %s | %s | %s | %.3f B | %s | %v | %.0f | %.2fM | %v | %s | %.3f B | %.0f | %.2f | %s | %s | %s |\n",
				sh, count(n), mib(growth), float64(growth)/float64(n), mib(int64(sk.end.HWM)), sk.cpu.Round(time.Second),
				float64(sk.cpu.Nanoseconds())/float64(n), float64(n)/sk.cpu.Seconds()/1e6, sk.wall.Round(time.Second),
				mib(int64(ref.heap)), float64(ref.heap)/float64(n), float64(ref.cpu.Nanoseconds())/float64(n),
				float64(sk.cpu)/float64(ref.cpu), mapRef, mapCPU, strings.Fields(sinkload.LoadAverage())[0])
		}
	}
	fmt.Printf("\nload average at the end %s\n", sinkload.LoadAverage())
	return nil
}

// makeCPU returns the CPU time making n IDs of spec takes alone, which
// the references' CPU times exclude.
func makeCPU(spec sinkload.Spec, n int64) (time.Duration, error) {
	body, err := sinkload.NewBody(spec)
	if err != nil {
		return 0, err
	}
	c0, err := sinkload.ReadCPU(0)
	if err != nil {
		return 0, err
	}
	var x generator.ID
	for k := range n {
		x ^= body.ID(k)
	}
	c1, err := sinkload.ReadCPU(0)
	if x == -1 { // keep the loop
		fmt.Print("")
	}
	return c1 - c0, err
}

// refResult is what a reference held and took.
type refResult struct {
	heap uint64
	cpu  time.Duration
}

// reference feeds n IDs of spec to a Verifier in this process as the sink
// would (runs of one node's IDs, chunks of 8,192) and returns the heap it
// holds and the CPU time taken.
func reference(spec sinkload.Spec, n int64) (refResult, error) {
	body, err := sinkload.NewBody(spec)
	if err != nil {
		return refResult{}, err
	}
	l := generator.DefaultLayout()
	base := heapAfterGC()
	c0, err := sinkload.ReadCPU(0)
	if err != nil {
		return refResult{}, err
	}
	v := verify.New(verify.Config{Kind: verify.KindSnowflake})
	issuers := make([]verify.IssuerID, spec.Nodes)
	for i := range issuers {
		issuers[i] = v.Issuer("node-"+strconv.Itoa(i), 0, int64(i))
	}
	chunk := make([]generator.ID, 0, 8192)
	var dups uint64
	flush := func() {
		for i := 0; i < len(chunk); {
			node := l.Decode(chunk[i]).Node
			j := i + 1
			for j < len(chunk) && l.Decode(chunk[j]).Node == node {
				j++
			}
			dups += uint64(v.Observe(verify.Observation{Issuer: issuers[node], IDs: chunk[i:j]}).Duplicates)
			i = j
		}
		chunk = chunk[:0]
	}
	for k := range n {
		chunk = append(chunk, body.ID(k))
		if len(chunk) == cap(chunk) {
			flush()
		}
	}
	flush()
	c1, err := sinkload.ReadCPU(0)
	if err != nil {
		return refResult{}, err
	}
	heap := heapAfterGC() - base
	if p := v.Progress(); p.IDs != uint64(n) || dups != 0 {
		return refResult{}, fmt.Errorf("reference: %d IDs, %d duplicates; want %d and 0", p.IDs, dups, n)
	}
	runtime.KeepAlive(v)
	v = nil
	debug.FreeOSMemory()
	return refResult{heap: heap, cpu: c1 - c0}, nil
}

// mapReference puts n IDs of spec in a map[generator.ID]struct{}.
func mapReference(spec sinkload.Spec, n int64) (refResult, error) {
	body, err := sinkload.NewBody(spec)
	if err != nil {
		return refResult{}, err
	}
	base := heapAfterGC()
	c0, _ := sinkload.ReadCPU(0)
	m := make(map[generator.ID]struct{})
	for k := range n {
		m[body.ID(k)] = struct{}{}
	}
	c1, _ := sinkload.ReadCPU(0)
	heap := heapAfterGC() - base
	if int64(len(m)) != n {
		return refResult{}, fmt.Errorf("map reference: %d IDs, want %d", len(m), n)
	}
	runtime.KeepAlive(m)
	m = nil
	debug.FreeOSMemory()
	return refResult{heap: heap, cpu: c1 - c0}, nil
}

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// sinkResult is what the sink process held and took.
type sinkResult struct {
	before, end sinkload.Mem
	cpu, wall   time.Duration
}

// measureSink starts bin verify and sends it n IDs of spec from clients
// clients at once, each its share in bodies of bodyMB.
func measureSink(bin string, spec sinkload.Spec, n int64, clients, bodyMB int) (sinkResult, error) {
	var res sinkResult
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "verify", "--listen", "127.0.0.1:0", "--json", "--expect-ids", strconv.FormatInt(n, 10), "--max-details", "1")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return res, err
	}
	var stdout strings.Builder
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return res, err
	}
	defer cmd.Process.Kill()
	addr := make(chan string, 1)
	go func() {
		b := make([]byte, 4096)
		var seen string
		for {
			k, err := stderr.Read(b)
			seen += string(b[:k])
			if i := strings.Index(seen, "listening on "); i >= 0 && strings.Contains(seen[i:], "\n") {
				addr <- strings.TrimSpace(strings.SplitN(seen[i+len("listening on "):], "\n", 2)[0])
				io.Copy(io.Discard, stderr)
				return
			}
			if err != nil {
				close(addr)
				return
			}
		}
	}()
	var base string
	select {
	case a, ok := <-addr:
		if !ok {
			return res, errors.New("verify printed no address")
		}
		base = "http://" + a
	case <-time.After(time.Minute):
		return res, errors.New("verify printed no address within a minute")
	}
	pid := cmd.Process.Pid
	if resp, err := http.Get(base + "/healthz"); err != nil {
		return res, err
	} else {
		resp.Body.Close()
	}
	if res.before, err = sinkload.ReadMem(pid); err != nil {
		return res, err
	}
	cpu0, err := sinkload.ReadCPU(pid)
	if err != nil {
		return res, err
	}
	start := time.Now()
	perBody := int64(bodyMB) * 1_000_000 / 19
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for c := range clients {
		from, to := n*int64(c)/int64(clients), n*int64(c+1)/int64(clients)
		wg.Go(func() {
			client := &http.Client{Timeout: 10 * time.Minute}
			for k := from; k < to; k += perBody {
				s := spec
				s.Skip, s.IDs = k, min(perBody, to-k)
				body, err := sinkload.NewBody(s)
				if err != nil {
					errs <- err
					return
				}
				req, _ := http.NewRequest("POST", base+"/v1/ids", body)
				req.ContentLength = -1
				resp, err := client.Do(req)
				if err != nil {
					errs <- err
					return
				}
				var a map[string]any
				json.NewDecoder(resp.Body).Decode(&a)
				resp.Body.Close()
				if resp.StatusCode != 200 || a["ids"] != float64(s.IDs) {
					errs <- fmt.Errorf("a body of %d IDs: %d %v", s.IDs, resp.StatusCode, a)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	res.wall = time.Since(start)
	cpu1, err := sinkload.ReadCPU(pid)
	if err != nil {
		return res, err
	}
	res.cpu = cpu1 - cpu0
	if res.end, err = sinkload.ReadMem(pid); err != nil {
		return res, err
	}
	resp, err := http.Post(base+"/v1/stop", "", nil)
	if err != nil {
		return res, err
	}
	resp.Body.Close()
	if err := cmd.Wait(); err != nil {
		return res, fmt.Errorf("verify: %v\n%s", err, stdout.String())
	}
	var rep struct {
		IDs, Duplicates uint64
		Exit            int
	}
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil || rep.IDs != uint64(n) || rep.Duplicates != 0 || rep.Exit != 0 {
		return res, fmt.Errorf("verify's report (%v): %s", err, stdout.String())
	}
	return res, nil
}

func count(n int64) string {
	switch {
	case n%1_000_000_000 == 0:
		return fmt.Sprintf("%d×10^9", n/1_000_000_000)
	case n%1_000_000 == 0:
		return fmt.Sprintf("%d×10^6", n/1_000_000)
	}
	return strconv.FormatInt(n, 10)
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
