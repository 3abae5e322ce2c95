package ntpcheck

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes r as a readable table followed by the findings and the
// verdict.
func WriteText(w io.Writer, r Report) error {
	var b strings.Builder
	l := r.Limits
	fmt.Fprintf(&b, "NTP check at %s: step threshold %s, budget %s, policy %v (max wait %s, max lead %s)\n\n",
		r.Time.UTC().Format(time.RFC3339), fmtDur(l.StepThreshold), fmtDur(l.MaxOffset), l.Policy, fmtDur(l.MaxWait), fmtDur(l.MaxLead))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tOFFSET\tRTT\tSTRATUM\tREFID\tLEAP\tROOT DELAY\tROOT DISP\tROOT DIST\tMIN ERR\tSANE\tQUERIES")
	for _, s := range r.Servers {
		q := fmtQueries(s.Queries)
		if !s.Answered {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t-\t-\t-\t-\t-\tno\t%s\n", s.Server, q)
			continue
		}
		sane := "yes"
		if !s.Sane {
			sane = "no"
		}
		ref := s.ReferenceID
		if ref == "" {
			ref = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Server, fmtSigned(s.Offset), fmtDur(s.RTT),
			s.Stratum, ref, s.Leap, fmtDur(s.RootDelay), fmtDur(s.RootDispersion), fmtDur(s.RootDistance),
			fmtDur(s.MinError), sane, q)
	}
	tw.Flush()
	b.WriteString("\n")
	if r.Usable > 0 {
		how := fmtDur(abs(r.Offset)) + " ahead of NTP time"
		switch off := roundDur(r.Offset); {
		case off == 0:
			how = "in step with NTP time (within 1µs)"
		case off > 0:
			how = fmtDur(off) + " behind NTP time"
		}
		fmt.Fprintf(&b, "host clock: %s (offset %s, median of %d usable, spread %s)\n",
			how, fmtSigned(r.Offset), r.Usable, fmtDur(r.Spread))
	} else {
		b.WriteString("host clock: unknown (no usable server)\n")
	}
	for _, s := range r.Servers {
		if !s.Sane && len(s.Insane) > 0 {
			fmt.Fprintf(&b, "insane %s: %s\n", s.Server, strings.Join(s.Insane, "; "))
		}
	}
	if len(r.Findings) == 0 {
		b.WriteString("findings: none\n")
	} else {
		b.WriteString("findings:\n")
		for _, f := range r.Findings {
			who := ""
			if f.Server != "" {
				who = f.Server + ": "
			}
			fmt.Fprintf(&b, "  %-5s %-16s %s%s\n", strings.ToUpper(f.Severity.String()), f.Code, who, f.Message)
		}
	}
	fmt.Fprintf(&b, "status: %v (exit %d)\n", r.Status, r.Status.ExitCode())
	_, err := io.WriteString(w, b.String())
	return err
}

// Summary is a one-line account of r, for --watch.
func Summary(r Report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v", r.Time.UTC().Format(time.RFC3339), r.Status)
	if r.Usable > 0 {
		fmt.Fprintf(&b, " offset %s spread %s (%d/%d usable)", fmtSigned(r.Offset), fmtDur(r.Spread), r.Usable, len(r.Servers))
	} else {
		fmt.Fprintf(&b, " (0/%d usable)", len(r.Servers))
	}
	for _, f := range r.Findings {
		if f.Severity > Info {
			fmt.Fprintf(&b, "; %s %s", f.Severity, f.Code)
			if f.Server != "" {
				fmt.Fprintf(&b, " %s", f.Server)
			}
		}
	}
	return b.String()
}

func fmtQueries(q map[Outcome]int) string {
	var parts []string
	for _, o := range Outcomes {
		if n := q[o]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", o, n))
		}
	}
	return strings.Join(parts, " ")
}

// secs converts a duration to float seconds for JSON.
func secs(d time.Duration) float64 { return d.Seconds() }

func jsonTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// MarshalJSON encodes durations as float seconds (fields named *_seconds)
// and times as RFC 3339.
func (s ServerResult) MarshalJSON() ([]byte, error) {
	type out struct {
		Server                string          `json:"server"`
		Outcome               Outcome         `json:"outcome"`
		Error                 string          `json:"error,omitempty"`
		Answered              bool            `json:"answered"`
		Usable                bool            `json:"usable"`
		Sane                  bool            `json:"sane"`
		Insane                []string        `json:"insane,omitempty"`
		Queries               map[Outcome]int `json:"queries"`
		OffsetSeconds         float64         `json:"offset_seconds"`
		RTTSeconds            float64         `json:"rtt_seconds"`
		JitterSeconds         float64         `json:"jitter_seconds"`
		Stratum               uint8           `json:"stratum"`
		ReferenceID           string          `json:"reference_id"`
		KissCode              string          `json:"kiss_code,omitempty"`
		Leap                  string          `json:"leap"`
		LeapIndicator         uint8           `json:"leap_indicator"`
		RootDelaySeconds      float64         `json:"root_delay_seconds"`
		RootDispersionSeconds float64         `json:"root_dispersion_seconds"`
		RootDistanceSeconds   float64         `json:"root_distance_seconds"`
		MinErrorSeconds       float64         `json:"min_error_seconds"`
		ServerTime            string          `json:"server_time,omitempty"`
		ReferenceTime         string          `json:"reference_time,omitempty"`
	}
	return json.Marshal(out{
		Server: s.Server, Outcome: s.Outcome, Error: s.Error, Answered: s.Answered, Usable: s.Usable,
		Sane: s.Sane, Insane: s.Insane, Queries: s.Queries,
		OffsetSeconds: secs(s.Offset), RTTSeconds: secs(s.RTT), JitterSeconds: secs(s.Jitter),
		Stratum: s.Stratum, ReferenceID: s.ReferenceID, KissCode: s.KissCode,
		Leap: s.Leap.String(), LeapIndicator: uint8(s.Leap),
		RootDelaySeconds: secs(s.RootDelay), RootDispersionSeconds: secs(s.RootDispersion),
		RootDistanceSeconds: secs(s.RootDistance), MinErrorSeconds: secs(s.MinError),
		ServerTime: jsonTime(s.ServerTime), ReferenceTime: jsonTime(s.ReferenceTime),
	})
}

// MarshalJSON encodes durations as float seconds (fields named *_seconds)
// and adds the exit code.
func (r Report) MarshalJSON() ([]byte, error) {
	type limits struct {
		StepThresholdSeconds float64 `json:"step_threshold_seconds"`
		MaxOffsetSeconds     float64 `json:"max_offset_seconds"`
		MaxSpreadSeconds     float64 `json:"max_spread_seconds"`
		MaxDistanceSeconds   float64 `json:"max_distance_seconds"`
		MaxMinErrorSeconds   float64 `json:"max_min_error_seconds"`
		Policy               string  `json:"policy"`
		MaxWaitSeconds       float64 `json:"max_wait_seconds"`
		MaxLeadSeconds       float64 `json:"max_lead_seconds"`
	}
	type out struct {
		Time          string         `json:"time"`
		Status        Status         `json:"status"`
		ExitCode      int            `json:"exit_code"`
		OffsetSeconds float64        `json:"offset_seconds"`
		SpreadSeconds float64        `json:"spread_seconds"`
		Usable        int            `json:"usable_servers"`
		LeapMidnight  string         `json:"leap_midnight,omitempty"`
		Limits        limits         `json:"limits"`
		Servers       []ServerResult `json:"servers"`
		Findings      []Finding      `json:"findings"`
	}
	l := r.Limits
	o := out{
		Time: jsonTime(r.Time), Status: r.Status, ExitCode: r.Status.ExitCode(),
		OffsetSeconds: secs(r.Offset), SpreadSeconds: secs(r.Spread), Usable: r.Usable,
		LeapMidnight: jsonTime(r.LeapMidnight),
		Limits: limits{
			StepThresholdSeconds: secs(l.StepThreshold), MaxOffsetSeconds: secs(l.MaxOffset),
			MaxSpreadSeconds: secs(l.MaxSpread), MaxDistanceSeconds: secs(l.MaxDistance),
			MaxMinErrorSeconds: secs(l.MaxMinError), Policy: l.Policy.String(),
			MaxWaitSeconds: secs(l.MaxWait), MaxLeadSeconds: secs(l.MaxLead),
		},
		Servers: r.Servers, Findings: r.Findings,
	}
	if o.Servers == nil {
		o.Servers = []ServerResult{}
	}
	if o.Findings == nil {
		o.Findings = []Finding{}
	}
	return json.Marshal(o)
}
