package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
)

// netnsReport is what a netns run reports: nodes are processes (their
// lease keepers' counters cannot be read), and each store fault's detail
// says which kernel path cut the store off.
func netnsReport() *harness.Report {
	how := "partition (outbound) via nftables (table inet snowchaos in sc-8cb0aa-n-a); partitions via nftables; delay via proxy (no netem in this kernel)"
	run := &harness.Result{Target: "netns-pg", Use: "netns", Verdict: harness.Pass,
		Figures: harness.Figures{IDs: 1000, Availability: 1},
		Lease:   &harness.LeaseResult{CountersNA: true, Refused: []string{"c at 2s: all worker IDs taken"}},
		Faults: []harness.FaultResult{
			{Name: "out", Kind: "store_outage", At: 1, Confirmed: true, Detail: []string{"a cut off from the lease store (outbound only) for 3s", how}},
			{Name: "whole", Kind: "store_outage", At: 5, Confirmed: true, Detail: []string{"lease store down for 1s", "store outage via link down (sc-8cb0aa-store eth0)"}},
		}}
	return &harness.Report{Scenarios: []*harness.ScenarioResult{{Name: "multihost-partition-one-way", File: "scenarios/multihost/partition-one-way.yaml",
		Faults: []harness.FaultSpec{{Name: "out", Kind: "store_outage", At: 1, End: 4}, {Name: "whole", Kind: "store_outage", At: 5, End: 6}},
		Runs:   []*harness.Result{run}, Verdict: harness.Pass}}}
}

// TestNetnsRowsShowWhatJSONShows: the text matrix and the HTML say how
// each store fault was cut (the kernel path the JSON's fault detail
// names), and print n/a, not 0, for the lease counters a process run does
// not have, as the JSON marks them (counters_na).
func TestNetnsRowsShowWhatJSONShows(t *testing.T) {
	rep := netnsReport()
	var txt, htm, js bytes.Buffer
	if err := report.Terminal(&txt, rep); err != nil {
		t.Fatal(err)
	}
	if err := report.HTML(&htm, rep); err != nil {
		t.Fatal(err)
	}
	if err := report.JSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"netns-pg  out: partition (outbound) via nftables (table inet snowchaos in sc-8cb0aa-n-a)",
		"netns-pg  whole: store outage via link down (sc-8cb0aa-store eth0)",
		"lease: acquired n/a, renewals n/a, fenced n/a, rebinds n/a, refused starts 1, handoff waits n/a",
	} {
		if !strings.Contains(txt.String(), want) {
			t.Errorf("the text report does not say %q:\n%s", want, txt.String())
		}
	}
	if strings.Contains(txt.String(), "acquired 0") || strings.Contains(htm.String(), "acquired 0") {
		t.Errorf("a figure the run does not have printed as 0")
	}
	if !strings.Contains(htm.String(), "acquired n/a") || !strings.Contains(htm.String(), "via nftables") {
		t.Errorf("the HTML report lacks the n/a lease figures or the kernel path")
	}
	var doc struct {
		Scenarios []struct {
			Runs []struct {
				Lease struct {
					CountersNA bool `json:"counters_na"`
				} `json:"lease"`
			} `json:"runs"`
		} `json:"scenarios"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil || !doc.Scenarios[0].Runs[0].Lease.CountersNA {
		t.Errorf("the JSON does not mark the counters n/a: %v", err)
	}
}
