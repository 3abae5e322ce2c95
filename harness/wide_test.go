package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// Test targets whose IDs are not Snowflakes, on virtual time:
//
//   - test-uuidv7-naive: UUIDv7s stamped with the host clock's millisecond
//     and a counter that restarts at 0 each new millisecond, no random
//     bits and no regression check (the UUIDv7 analogue of
//     bad-no-rewind-check): a step back replays earlier IDs exactly;
//   - test-uuidv4: random UUIDv4s from a seeded generator;
//   - test-string: "<worker>-<n>", n counting from 0 in each process life,
//     so a restart repeats the first life's strings.
func init() {
	for _, k := range []verify.Kind{verify.KindUUIDv7, verify.KindUUIDv4, verify.KindString} {
		target.Register(wideTarget{k})
	}
}

type wideTarget struct{ kind verify.Kind }

var _ target.WideTarget = wideTarget{}

func (t wideTarget) name() string {
	if t.kind == verify.KindUUIDv7 {
		return "test-uuidv7-naive"
	}
	return "test-" + t.kind.String()
}

func (t wideTarget) Info() target.Info {
	return target.Info{Name: t.name(), Doc: "a test generator of " + t.kind.String() + " IDs", KnownBad: t.kind != verify.KindUUIDv4,
		Caps: target.Capabilities{Faults: []faults.Kind{faults.KindStep, faults.KindRestart, faults.KindClone}, Simulated: true, OffsetTolerance: time.Microsecond}}
}

func (t wideTarget) IDKind(target.NodeSpec) verify.Kind { return t.kind }

func (t wideTarget) Start(_ context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	n := &wideNode{kind: t.kind, worker: spec.Worker, host: target.NewHost(env.Base, spec.ClockOffset),
		rng: rand.New(rand.NewPCG(uint64(spec.Worker), 16))}
	n.mu.up = true
	return n, nil
}

type wideNode struct {
	kind   verify.Kind
	worker int64
	host   *target.Host
	rng    *rand.Rand
	mu     struct {
		sync.Mutex
		up        bool
		last, seq int64 // uuidv7: the last millisecond and its counter
		n         int   // strings issued in this life
	}
}

var _ target.WideNode = (*wideNode)(nil)

func (n *wideNode) Issue(context.Context, []generator.ID) (int, error) {
	return 0, target.ErrUnsupported
}

func (n *wideNode) IssueWide(_ context.Context, dst []verify.ID128) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.mu.up || n.kind == verify.KindString {
		return 0, target.ErrStopped
	}
	for i := range dst {
		if n.kind == verify.KindUUIDv4 {
			dst[i] = verify.ID128{Hi: n.rng.Uint64()&^0xf000 | 0x4000, Lo: n.rng.Uint64()>>2 | 1<<63}
			continue
		}
		wall, _ := n.host.Clock.Now()
		if ms := wall / 1e6; ms != n.mu.last {
			n.mu.last, n.mu.seq = ms, 0
		} else {
			n.mu.seq++
		}
		dst[i] = verify.ID128{Hi: uint64(n.mu.last)<<16 | 0x7000 | uint64(n.mu.seq)&0xfff, Lo: 1<<63 | uint64(n.worker)}
	}
	return len(dst), nil
}

func (n *wideNode) IssueStrings(_ context.Context, dst []string) (int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.mu.up || n.kind != verify.KindString {
		return 0, target.ErrStopped
	}
	for i := range dst {
		dst[i] = fmt.Sprintf("%d-%d", n.worker, n.mu.n)
		n.mu.n++
	}
	return len(dst), nil
}

func (n *wideNode) Stop(context.Context, target.StopOptions) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.up, n.mu.last, n.mu.seq, n.mu.n = false, 0, 0, 0
	return nil
}

func (n *wideNode) Start(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.up = true
	return nil
}

func (n *wideNode) Clock() target.ClockControl             { return n.host }
func (n *wideNode) Maintain(context.Context) time.Duration { return -1 }
func (n *wideNode) Worker() int64                          { return n.worker }
func (n *wideNode) Close() error                           { return n.Stop(context.Background(), target.StopOptions{}) }

// TestWideTargets: simulated runs of the wide test targets under a step
// back and a restart. The naive UUIDv7 generator is caught repeating and
// reordering its IDs and shows the step as lag; the UUIDv4 run passes its
// duplicates check with order and lead n/a (not counted); the string
// generator is caught repeating its first life's IDs after the restart.
// The reports say the kind, and the run is deterministic.
func TestWideTargets(t *testing.T) {
	suite := load(t, "testdata/wide/*.yaml")
	rep := run(t, suite, harness.Options{})
	byName := map[string]*harness.Result{}
	for _, r := range rep.Scenarios[0].Runs {
		byName[r.Target] = r
		t.Logf("%s: %s, kind %q, %+v", r.Target, r.Verdict, r.IDKind, r.Figures)
	}
	v7, v4, str := byName["test-uuidv7-naive"], byName["test-uuidv4"], byName["test-string"]
	if v7 == nil || v4 == nil || str == nil {
		t.Fatalf("runs %v", byName)
	}
	if v7.IDKind != "uuidv7" || v7.ControlVerdict() != harness.Caught || v7.Figures.Duplicates == 0 || v7.Figures.OrderViolations == 0 {
		t.Errorf("naive uuidv7: kind %q, %s, %d duplicates, %d order violations: want caught with both", v7.IDKind, v7.ControlVerdict(), v7.Figures.Duplicates, v7.Figures.OrderViolations)
	}
	if lag := v7.Figures.MaxLag; lag < harness.Duration(40*time.Millisecond) || lag > harness.Duration(60*time.Millisecond) {
		t.Errorf("naive uuidv7: max lag %s after a 50ms step back", lag)
	}
	if len(v7.Duplicates) == 0 || !strings.HasPrefix(v7.Duplicates[0].ID, "0") || len(v7.Duplicates[0].ID) != 36 {
		t.Errorf("naive uuidv7: duplicates listed %+v, want UUID text", v7.Duplicates)
	}
	if v4.IDKind != "uuidv4" || v4.Verdict != harness.Pass || v4.Figures.IDs == 0 || v4.Figures.Duplicates != 0 {
		t.Errorf("uuidv4: kind %q, %s, %+v", v4.IDKind, v4.Verdict, v4.Figures)
	}
	na := 0
	for _, c := range v4.Checks {
		if c.Verdict == harness.NA {
			na++
			if !strings.Contains(c.Reason, "uuidv4 IDs") {
				t.Errorf("uuidv4 %s: reason %q", c.Expr, c.Reason)
			}
		}
	}
	if na != 3 {
		t.Errorf("uuidv4: %d checks n/a, want 3 (order, restart, lag): %+v", na, v4.Checks)
	}
	if str.IDKind != "string" || str.ControlVerdict() != harness.Caught || str.Figures.Duplicates == 0 {
		t.Errorf("string: kind %q, %s, %d duplicates", str.IDKind, str.ControlVerdict(), str.Figures.Duplicates)
	}
	for _, d := range str.Duplicates {
		if d.First != "a#0" || d.Second != "a#1" {
			t.Errorf("string duplicate %+v: want first a#0, again a#1 (the restart)", d)
		}
	}

	js := jsonOf(t, rep)
	if !bytes.Equal(js, jsonOf(t, run(t, suite, harness.Options{Parallel: 1}))) {
		t.Error("two runs of the wide scenario gave different reports")
	}
	var back harness.Report
	if err := json.Unmarshal(js, &back); err != nil || back.Scenarios[0].Runs[1].Kind() != v4.Kind() {
		t.Errorf("JSON report: %v, kind read back %v", err, back.Scenarios[0].Runs[1].Kind())
	}
	var term, junit, html bytes.Buffer
	report.Terminal(&term, rep)
	report.JUnit(&junit, rep)
	report.HTML(&html, rep)
	for _, want := range []string{"uuidv4 IDs: duplicates checked; order, restarts, lead and lag n/a", "uuidv7 IDs: duplicates, order, restarts, lead and lag checked"} {
		if !strings.Contains(term.String(), want) || !strings.Contains(html.String(), want) {
			t.Errorf("terminal or HTML report lacks %q", want)
		}
	}
	if !strings.Contains(junit.String(), "not applicable: uuidv4 IDs have no order") {
		t.Errorf("JUnit lacks the n/a checks as skipped:\n%s", junit.String())
	}
}
