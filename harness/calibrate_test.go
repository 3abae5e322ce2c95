package harness

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/verify"
)

// fakeProber returns scripted overshoots and wake-ups, cycling.
type fakeProber struct {
	over, wake []time.Duration
	i, j       int
}

func (f *fakeProber) Sleep(d time.Duration) time.Duration {
	o := f.over[f.i%len(f.over)]
	f.i++
	return d + o
}

func (f *fakeProber) Wake() time.Duration {
	w := f.wake[f.j%len(f.wake)]
	f.j++
	return w
}

func TestCalibrateFigures(t *testing.T) {
	// 100 sleeps: overshoots 1..100 µs; wakes 2 µs except one of 300 µs.
	var over []time.Duration
	for i := 1; i <= 100; i++ {
		over = append(over, time.Duration(i)*time.Microsecond)
	}
	wake := make([]time.Duration, 100)
	for i := range wake {
		wake[i] = 2 * time.Microsecond
	}
	wake[37] = 300 * time.Microsecond
	p := &fakeProber{over: over, wake: wake}
	c, err := Calibrate(p, 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.i != 100 || p.j != 100 {
		t.Fatalf("probed %d sleeps, %d wakes; want 100 each", p.i, p.j)
	}
	if c.Sleep.P50 != Duration(50*time.Microsecond) || c.Sleep.P99 != Duration(99*time.Microsecond) || c.Sleep.Max != Duration(100*time.Microsecond) {
		t.Errorf("sleep overshoot %s: want p50 50µs, p99 99µs, max 100µs", c.Sleep)
	}
	if c.Wake.P50 != Duration(2*time.Microsecond) || c.Wake.Max != Duration(300*time.Microsecond) {
		t.Errorf("wake %s: want p50 2µs, max 300µs", c.Wake)
	}
	// 3 x (100µs + 300µs) = 1.2ms, rounded up to 2ms.
	if c.Tolerance != Duration(2*time.Millisecond) || c.TooNoisy {
		t.Errorf("tolerance %s (too noisy %v): want 2ms", c.Tolerance, c.TooNoisy)
	}
	if s := c.String(); !strings.Contains(s, "tolerance 3 x (100µs + 300µs) = 2ms") {
		t.Errorf("String() = %q: want the derivation", s)
	}
}

func TestCalibrateNegativeAndNoisy(t *testing.T) {
	// A sleep that returns early and a clock that steps back count as 0.
	c, err := Calibrate(&fakeProber{over: []time.Duration{-time.Millisecond / 2}, wake: []time.Duration{-time.Second}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if c.Sleep.Max != 0 || c.Wake.Max != 0 || c.Tolerance != Duration(ToleranceStep) {
		t.Errorf("got %s: want zero jitter and the minimum tolerance", c)
	}
	c, err = Calibrate(&fakeProber{over: []time.Duration{80 * time.Millisecond}, wake: []time.Duration{time.Microsecond}}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !c.TooNoisy || c.Tolerance != Duration(MaxTolerance) {
		t.Errorf("got %s: want too noisy at %s", c, MaxTolerance)
	}
	for _, n := range []int{0, -1, 100001} {
		if _, err := Calibrate(&fakeProber{over: []time.Duration{0}, wake: []time.Duration{0}}, n); err == nil {
			t.Errorf("Calibrate(%d samples): no error", n)
		}
	}
}

func TestSystemProber(t *testing.T) {
	if testing.Short() {
		t.Skip("measures the machine")
	}
	c, err := Calibrate(SystemProber(), 20)
	if err != nil {
		t.Fatal(err)
	}
	if c.Tolerance < Duration(ToleranceStep) || c.Tolerance > Duration(MaxTolerance) || c.Sleep.P50 > c.Sleep.Max || c.Wake.P99 > c.Wake.Max {
		t.Errorf("implausible calibration %s", c)
	}
}

func mustExpr(t *testing.T, s string) scenario.Expr {
	t.Helper()
	e, err := scenario.ParseExpr(s)
	if err != nil {
		t.Fatalf("%s: %v", s, err)
	}
	return e
}

func TestWidenSafetyNever(t *testing.T) {
	cal := &Calibration{Tolerance: Duration(5 * time.Millisecond)}
	noisy := &Calibration{Tolerance: Duration(MaxTolerance), TooNoisy: true}
	for _, m := range scenario.Metrics() {
		if timingMetric(m.Metric) {
			if m.Unit == scenario.UnitCount {
				t.Errorf("%s: a count is never a timing metric", m.Metric)
			}
			continue
		}
		for _, op := range []string{"==", "<=", ">=", "<", ">", "!="} {
			for _, expected := range []bool{false, true} {
				e := mustExpr(t, string(m.Metric)+" "+op+" 3")
				e.Expected = expected
				for _, c := range []*Calibration{cal, noisy} {
					got, bound, isNoisy := widen(e, c, time.Second)
					if got != e || bound != "" || isNoisy {
						t.Errorf("%s (expected %v) changed in real mode: %v %q %v", e.Text, expected, got, bound, isNoisy)
					}
				}
			}
		}
	}
	for _, m := range []scenario.Metric{scenario.MetricDuplicates, scenario.MetricOrder, scenario.MetricRestart} {
		if timingMetric(m) {
			t.Errorf("%s is a safety metric", m)
		}
	}
}

func TestWidenTiming(t *testing.T) {
	cal := &Calibration{Tolerance: Duration(5 * time.Millisecond)}
	for _, tc := range []struct {
		expr     string
		expected bool
		window   time.Duration
		bound    string
	}{
		{"max_wait <= 6ms", false, time.Second, "wait max <= 11ms"},
		{"lag p99 < 6ms", false, time.Second, "lag p99 < 11ms"},
		{"gap >= 2ms", false, time.Second, "gap >= 0s"},
		{"lead > 10ms", true, time.Second, "lead max > 15ms"},      // a control is caught only beyond the jitter
		{"max_wait <= 3ms", true, time.Second, "wait max <= -2ms"}, // tightened: unreachable
		{"availability == 1", false, 2 * time.Second, "availability >= 0.9975"},
		{"availability >= 0.99", false, 10 * time.Second, "availability >= 0.9890"}, // at least 0.001
		{"availability < 0.9", true, time.Second, "availability < 0.8950"},
		{"availability == 1", true, time.Second, ""}, // an expected exact figure is judged as written
		{"max_wait == 0s", false, time.Second, ""},
	} {
		e := mustExpr(t, tc.expr)
		e.Expected = tc.expected
		got, bound, noisy := widen(e, cal, tc.window)
		if bound != tc.bound || noisy {
			t.Errorf("%s (expected %v): bound %q (noisy %v), want %q", tc.expr, tc.expected, bound, noisy, tc.bound)
		}
		if tc.bound == "" && got != e {
			t.Errorf("%s: changed to %v without a bound", tc.expr, got)
		}
	}
	if _, _, noisy := widen(mustExpr(t, "max_wait <= 6ms"), &Calibration{TooNoisy: true}, time.Second); !noisy {
		t.Error("a timing bound on a too noisy machine: not reported noisy")
	}
	if got, bound, _ := widen(mustExpr(t, "max_wait <= 6ms"), nil, time.Second); bound != "" || got.Value != float64(6*time.Millisecond) {
		t.Error("simulated mode (no calibration) changed a bound")
	}
}

func TestDuringRun(t *testing.T) {
	cal := &Calibration{Sleep: Jitter{Max: Duration(time.Millisecond)}, Wake: Jitter{Max: Duration(100 * time.Microsecond)}, Tolerance: Duration(4 * time.Millisecond)}
	for _, tc := range []struct {
		stall *Stall
		want  time.Duration
		noisy bool
	}{
		{nil, 4 * time.Millisecond, false},
		{&Stall{Samples: 9, Overshoot: Jitter{Max: Duration(500 * time.Microsecond)}}, 4 * time.Millisecond, false}, // quieter: kept
		{&Stall{Samples: 9, Overshoot: Jitter{Max: Duration(5 * time.Millisecond)}}, 16 * time.Millisecond, false},  // 3 x 5.1ms
		{&Stall{Samples: 9, Overshoot: Jitter{Max: Duration(time.Second)}}, MaxTolerance, true},
	} {
		got := cal.during(tc.stall)
		if time.Duration(got.Tolerance) != tc.want || got.TooNoisy != tc.noisy {
			t.Errorf("stall %+v: tolerance %s noisy %v, want %s %v", tc.stall, got.Tolerance, got.TooNoisy, tc.want, tc.noisy)
		}
	}
	if cal.Tolerance != Duration(4*time.Millisecond) {
		t.Error("during changed the suite's calibration")
	}
	p := startStallProbe(&fakeProber{over: []time.Duration{2 * time.Millisecond}, wake: []time.Duration{0}})
	time.Sleep(time.Millisecond)
	st := p.stop()
	if st == nil || st.Samples == 0 || st.Overshoot.Max != Duration(2*time.Millisecond) || p.stop() != st {
		t.Errorf("probe: %+v", st)
	}
}

// TestEvaluateNoisy: on a machine too noisy to judge timing, a wait or
// availability bound that holds as written passes (jitter only worsens
// it), one that does not is unknown unless jitter could not explain it,
// a lag bound is decided only where 1s of jitter either way would not change it,
// and safety checks are judged as always.
func TestEvaluateNoisy(t *testing.T) {
	s := waitScenario(t, `"duplicates == 0", "max_wait <= 5ms", "max_wait <= 1ms", "availability == 1", "lag p99 <= 500ms", "lag p99 <= 2s"`)
	var vr verify.Result
	vr.Ordered, vr.Timed = true, true
	vr.Duplicates = 1
	vr.Calls.Total, vr.Calls.OK = 10, 10
	vr.Wait = verify.Dist{Count: 10, Max: 3 * time.Millisecond, P99: 3 * time.Millisecond, P50: time.Millisecond}
	vr.Lag = verify.Dist{Count: 10}
	noisy := &Calibration{Tolerance: Duration(MaxTolerance), Wanted: Duration(time.Second), TooNoisy: true}
	want := []Verdict{Fail, Pass, Unknown, Pass, Unknown, Pass}
	for i, c := range evaluate(s, "wait", scenario.ModeReal, vr, nil, Figures{}, noisy) {
		if c.Verdict != want[i] || c.Bound != "" {
			t.Errorf("%s: %s (bound %q), want %s", c.Expr, c.Verdict, c.Bound, want[i])
		}
	}
}
