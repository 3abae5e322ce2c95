package remote

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestCrashHandoffControl shows that scenarios/http/lease-crash-handoff.yaml
// catches a successor repeating a crashed holder's IDs: against a snowchaos built
// with -tags negativecontrols and run with --lease-mark-at-renewal (the
// mark reaches Postgres only at renewal), the successor of the killed
// process repeats its IDs. TestHTTPScenarios runs the same scenario
// against the normal build, which must repeat none.
func TestCrashHandoffControl(t *testing.T) {
	if testing.Short() {
		t.Skip("a real-mode scenario of about 20 s")
	}
	if !postgresReachable(t) {
		t.Skip("no Postgres (CI unset)")
	}
	ctl := filepath.Join(t.TempDir(), "snowchaos-negativecontrols")
	if out, err := exec.Command("go", "build", "-tags", "negativecontrols", "-o", ctl, "github.com/snowchaos/snowchaos/cmd/snowchaos").CombinedOutput(); err != nil {
		t.Fatalf("building snowchaos with -tags negativecontrols: %v\n%s", err, out)
	}
	t.Setenv(EnvBinary, ctl)
	s, err := scenario.ParseFile("../../../scenarios/http/lease-crash-handoff.yaml")
	if err != nil {
		t.Fatal(err)
	}
	off := false
	s.Targets = []scenario.Target{{Name: "process-mark-at-renewal", Use: ProcessName, MarkWriteThrough: &off, Line: 1}}
	exp := scenario.Expectation{Target: "process-mark-at-renewal", Line: 1}
	for _, src := range []string{"duplicates > 0", "restart_violations > 0"} {
		x, err := scenario.ParseExpr(src)
		if err != nil {
			t.Fatal(err)
		}
		exp.Exprs = append(exp.Exprs, x)
	}
	s.Expect = []scenario.Expectation{exp}
	suite := []*scenario.Scenario{s}
	if err := harness.Prepare(suite, harness.Options{}); err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(context.Background(), suite, harness.Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := rep.Scenarios[0].Runs[0]
	t.Logf("%s: %s (%d IDs, %d duplicates, %d restart violations)", r.Target, r.Verdict, r.Figures.IDs, r.Figures.Duplicates, r.Figures.RestartViolations)
	if r.Verdict != harness.Pass || r.Figures.Duplicates == 0 {
		t.Fatalf("negative control escaped: verdict %s, error %q, checks %+v, faults %+v", r.Verdict, r.Error, r.Checks, r.Faults)
	}
}
