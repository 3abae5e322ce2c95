package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify/sink/sinkload"
)

// Sizes of TestVerifySinkMemoryBounded; make sink-rss runs it at the
// sizes of the full measurement (16 clients, 60 MB each).
const (
	sinkClientsEnv = "SNOWCHAOS_SINK_CLIENTS" // concurrent clients (default 16)
	sinkBodyMBEnv  = "SNOWCHAOS_SINK_BODY_MB" // each one's body, MB (default 8)
)

// sinkRSSBound is the peak resident memory the sink may reach whatever
// the bodies' size: about 5 times what it measured (docs/verify-sink.md),
// and a fraction of what holding the bodies whole takes (16 bodies of
// 8 MB are 128 MB before any growth; 16 of 60 MB took 1.8 GB).
const sinkRSSBound = 100 << 20

// sinkSettledBound is how far above its resident memory before the load
// the sink may stay once the load is over: the Verifier's state for the
// IDs (well under 1 MB: they are dense) and the allocator's slack.
const sinkSettledBound = 48 << 20

func envInt(t *testing.T, name string, def, lo, hi int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		t.Fatalf("%s=%q: want an integer in %d..%d", name, s, lo, hi)
	}
	return n
}

// buildSnowchaos builds the snowchaos binary without the race detector,
// whose shadow memory would swamp what is measured.
func buildSnowchaos(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "snowchaos")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/snowchaos/snowchaos/cmd/snowchaos").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestVerifySinkMemoryBounded: 16 clients each POST a body of 8 MB (make
// sink-rss: 60 MB) at once to a snowchaos verify child process. Its peak
// resident memory (VmHWM) must stay under sinkRSSBound, and once every
// answer is in, its resident memory (VmRSS) must come back to within
// sinkSettledBound of what it was before the load (waited for, up to 3
// minutes: Go returns freed memory to the system in the background, and
// forces a collection every 2 minutes). Every count must be exact: the
// IDs, the planted duplicates (each client repeats some of its
// neighbour's IDs) and the bad lines (holding a byte 0xbe).
func TestVerifySinkMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds snowchaos and sends it 128 MB")
	}
	clients := envInt(t, sinkClientsEnv, 16, 1, 256)
	bodyMB := envInt(t, sinkBodyMBEnv, 8, 2, 60)
	bin := buildSnowchaos(t)

	var stdout testenv.SyncBuffer
	cmd := exec.Command(bin, "verify", "--listen", "127.0.0.1:0", "--json", "--expect-ids", "1")
	cmd.Stdout = &stdout
	p, err := testenv.StartProcess(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(syscall.SIGKILL, 0) })
	var base string
	testenv.WaitFor(t, time.Minute, func() bool {
		for _, l := range strings.Split(stdout.String()+"\n"+p.Log(), "\n") {
			if a, ok := strings.CutPrefix(l, "listening on "); ok {
				base = "http://" + strings.TrimSpace(a)
				return true
			}
		}
		return false
	}, "verify printed no address:\n%s", p.Log())
	pid := cmd.Process.Pid
	if resp, err := http.Get(base + "/healthz"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	before, err := sinkload.ReadMem(pid)
	if err != nil {
		t.Fatal(err)
	}

	// Each client's IDs are dense (4,096 per ms) with node field c; every
	// 10,007th is followed by the same ID of node c+1, which client c+1
	// also sends (one duplicate each), every 100,003rd by a bad line.
	idsEach := int64(bodyMB) * 1_000_000 / 19 // 18 digits and a newline
	bodies := make([]*sinkload.Body, clients)
	answers := make([]map[string]float64, clients)
	codes := make([]int, clients)
	var wg sync.WaitGroup
	for c := range clients {
		b, err := sinkload.NewBody(sinkload.Spec{Shape: sinkload.Dense, Node0: int64(c), Nodes: 1, IDs: idsEach,
			DupEvery: 10_007, DupNode: int64((c + 1) % clients), BadEvery: 100_003})
		if err != nil {
			t.Fatal(err)
		}
		bodies[c] = b
		wg.Go(func() {
			req, _ := http.NewRequest("POST", base+"/v1/ids", b)
			req.ContentLength = -1
			client := &http.Client{Timeout: 10 * time.Minute}
			resp, err := client.Do(req)
			if err != nil {
				t.Errorf("client %d: %v", c, err)
				return
			}
			defer resp.Body.Close()
			codes[c] = resp.StatusCode
			json.NewDecoder(resp.Body).Decode(&answers[c])
		})
	}
	wg.Wait()
	peak, err := sinkload.ReadMem(pid)
	if err != nil {
		t.Fatal(err)
	}
	var ids, dups, bad, bytes int64
	for c, b := range bodies {
		ids, dups, bad, bytes = ids+b.IDLines, dups+b.Dups, bad+b.Bad, bytes+b.Bytes
		// Bad lines make the answer a 400 naming the first; the rest of
		// the body is still verified.
		if a := answers[c]; codes[c] != 400 || a["ids"] != float64(b.IDLines) || a["bad_lines"] != float64(b.Bad) || a["line"] != float64(100_003+100_003/10_007+1) {
			t.Errorf("client %d: %d %v, want 400 with %d IDs and %d bad lines, the first on line %d", c, codes[c], a, b.IDLines, b.Bad, 100_003+100_003/10_007+1)
		}
	}
	t.Logf("%d clients sent %d bytes: %d ID lines (%d planted duplicates), %d bad lines; the sink's resident memory: %d MiB before, peak %d MiB (GOMAXPROCS %d, load average %s)",
		clients, bytes, ids, dups, bad, before.RSS>>20, peak.HWM>>20, runtime.GOMAXPROCS(0), sinkload.LoadAverage())
	if peak.HWM > sinkRSSBound {
		t.Errorf("the sink's peak resident memory was %d MiB, over the bound of %d MiB", peak.HWM>>20, sinkRSSBound>>20)
	}

	// Back down: resident memory within sinkSettledBound of before.
	settled := time.Now()
	var after sinkload.Mem
	if !testenv.Eventually(t.Context(), 3*time.Minute, func() bool {
		after, err = sinkload.ReadMem(pid)
		return err == nil && after.RSS < before.RSS+sinkSettledBound
	}) {
		t.Errorf("3 minutes after the load the sink's resident memory is %d MiB (%d MiB before the load, bound +%d MiB)", after.RSS>>20, before.RSS>>20, sinkSettledBound>>20)
	} else {
		t.Logf("resident memory back to %d MiB %v after the last answer", after.RSS>>20, time.Since(settled).Round(time.Millisecond))
	}

	resp, err := http.Post(base+"/v1/stop", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	select {
	case <-p.Exited():
	case <-time.After(time.Minute):
		t.Fatalf("verify did not stop:\n%s", p.Log())
	}
	r, err := jsonReport(stdout.String())
	if err != nil {
		t.Fatalf("%v:\n%s\n%s", err, stdout.String(), p.Log())
	}
	if r.IDs != uint64(ids) || r.Duplicates != uint64(dups) || r.BadLines != uint64(bad) || r.OrderViolations != 0 || r.Exit != exitFailure {
		t.Errorf("report: %d IDs, %d duplicates, %d bad lines, %d order violations, exit %d; want %d IDs, %d duplicates, %d bad lines, no order violation, exit 1",
			r.IDs, r.Duplicates, r.BadLines, r.OrderViolations, r.Exit, ids, dups, bad)
	}
}

// jsonReport reads verify's JSON report, the last thing on its stdout.
func jsonReport(out string) (verifyReport, error) {
	var r verifyReport
	i := strings.LastIndex(out, "\n{")
	if strings.HasPrefix(out, "{") {
		i = -1
	}
	if err := json.Unmarshal([]byte(out[i+1:]), &r); err != nil {
		return r, fmt.Errorf("no JSON report: %w", err)
	}
	return r, nil
}
