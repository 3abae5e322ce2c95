package harness_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/ntpcheck"
)

// recordedNTP reads a response ntpcheck recorded from a real server
// (ntpcheck/testdata/responses) and shifts it as a host clock ahead of
// it by ahead would have seen it.
func recordedNTP(t *testing.T, name string, ahead time.Duration) *ntp.Response {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "ntpcheck", "testdata", "responses", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r ntp.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	r.ClockOffset = -ahead
	r.Timestamps.ClientXmit = r.Timestamps.ClientXmit.Add(ahead)
	r.Timestamps.ClientRecv = r.Timestamps.ClientRecv.Add(ahead)
	r.MinError = max(ahead-r.RTT/2, 0) // ahead >= 0 here
	return &r
}

// TestNTPSuggestionRunsAsPredicted runs the scenarios `snowchaos ntp
// check --suggest-scenario` writes through the harness on simulated time:
// the harness's parser and validation accept them, and the generator does
// what ntpcheck predicted (ntpcheck.RewindEffect) in the step's window:
// whether every request got IDs, and how long the node issued none.
func TestNTPSuggestionRunsAsPredicted(t *testing.T) {
	const by = 300 * time.Millisecond
	resp := recordedNTP(t, "chrony-local-stratum8", by)
	for _, cfg := range []ntpcheck.Config{
		{Policy: generator.PolicyRefuse},
		{Policy: generator.PolicyWait, MaxWait: time.Second},
		{Policy: generator.PolicyWait, MaxWait: 100 * time.Millisecond},
		{Policy: generator.PolicyLogical, MaxLead: time.Second},
		{Policy: generator.PolicyLogical, MaxLead: 100 * time.Millisecond},
	} {
		r := ntpcheck.Evaluate(cfg, []ntpcheck.ServerResult{ntpcheck.Summarize("a:123", []ntpcheck.Sample{{Response: resp}}, cfg)})
		lim := r.Limits
		name := fmt.Sprintf("%v-wait%v-lead%v", lim.Policy, lim.MaxWait, lim.MaxLead)
		t.Run(name, func(t *testing.T) {
			y, err := ntpcheck.SuggestScenario(r)
			if err != nil {
				t.Fatal(err)
			}
			s, err := scenario.Parse(name+".yaml", y)
			if err != nil {
				t.Fatalf("the harness parser rejects the suggestion: %v\n%s", err, y)
			}
			if err := harness.Validate(s, ""); err != nil {
				t.Fatalf("the harness rejects the suggestion: %v\n%s", err, y)
			}
			if n := s.Nodes[0]; n.Policy != lim.Policy || n.MaxWait != lim.MaxWait || n.MaxLead != lim.MaxLead || n.ClockOffset != -r.Offset {
				t.Fatalf("node %+v does not carry the measured offset %v and the limits %+v", n, r.Offset, lim)
			}
			res := harness.RunOne(context.Background(), s, s.Targets[0], harness.Options{})
			if res.Verdict != harness.Pass || res.Error != "" {
				t.Fatalf("run verdict %v error %q\n%s", res.Verdict, res.Error, y)
			}
			var w *harness.WindowResult
			for i := range res.Windows {
				if res.Windows[i].Name == "ntp-step" {
					w = &res.Windows[i]
				}
			}
			if w == nil {
				t.Fatalf("no ntp-step window in %+v", res.Windows)
			}
			e := ntpcheck.RewindEffect(by, lim.Policy, lim.MaxWait, lim.MaxLead)
			if got := w.Availability == 1; got != e.Covered {
				t.Errorf("predicted covered=%v (%s), simulated availability %v", e.Covered, e.Text, w.Availability)
			}
			// Simulated time is deterministic; allow the load's spacing
			// (4 clients at 5000/s) and tick rounding.
			gap := time.Duration(w.LongestGap)
			if diff := gap - e.Stall; diff > 5*time.Millisecond || diff < -5*time.Millisecond {
				t.Errorf("predicted stall %v (%s), simulated longest gap %v", e.Stall, e.Text, gap)
			}
		})
	}
}
