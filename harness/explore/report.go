package explore

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
)

// Text writes the report for a person: what was run and covered, then
// each find with its original and shrunk YAML side by side.
func Text(w io.Writer, r *Report) error {
	var b strings.Builder
	rate := 0.0
	if r.Elapsed > 0 {
		rate = float64(r.Runs) / r.Elapsed.Seconds()
	}
	fmt.Fprintf(&b, "explore: seed %d, targets %s: %d schedules, %d runs in %s (%.1f runs/s)\n",
		r.Seed, strings.Join(r.Targets, ", "), r.Schedules, r.Runs, r.Elapsed.Round(time.Millisecond), rate)
	fmt.Fprintf(&b, "  %d passed, %d failed, %d unknown, %d invalid", r.Passed, r.Failed, r.Unknown, r.Invalid)
	if r.Stopped {
		b.WriteString(" (stopped early)")
	}
	if r.Stalled {
		b.WriteString("\n  a call never returned: explore stopped there and shrank nothing (the call may still be running)")
	}
	b.WriteString("\n\nfault kinds covered (faults drawn, magnitude range, back/forward):\n")
	for _, k := range faults.Kinds(faults.InScenario) {
		n := r.Kinds[k]
		line := fmt.Sprintf("  %-13s %6d", k, n)
		if m := r.Magnitudes[k]; m != nil {
			line += "  " + m.String()
		}
		if n == 0 {
			line += "  (none drawn)"
		}
		b.WriteString(line + "\n")
	}
	combos := slices.Collect(maps.Keys(r.Combos))
	sort.Slice(combos, func(i, j int) bool {
		if r.Combos[combos[i]] != r.Combos[combos[j]] {
			return r.Combos[combos[i]] > r.Combos[combos[j]]
		}
		return combos[i] < combos[j]
	})
	multi := 0
	for _, c := range combos {
		if strings.Contains(c, "+") {
			multi++
		}
	}
	fmt.Fprintf(&b, "\ncombinations: %d distinct sets of kinds, %d of them with two kinds or more; most drawn:", len(combos), multi)
	for i, c := range combos {
		if i == 8 {
			break
		}
		fmt.Fprintf(&b, " %s %d;", c, r.Combos[c])
	}
	b.WriteString("\n")
	if len(r.UnknownWhy) > 0 {
		b.WriteString("\nunknown and invalid runs, by reason:\n")
		whys := slices.Sorted(maps.Keys(r.UnknownWhy))
		for _, why := range whys {
			fmt.Fprintf(&b, "  %4d  %s\n", r.UnknownWhy[why], why)
		}
	}
	if len(r.Finds) == 0 {
		b.WriteString("\nno failure found\n")
	}
	for i, f := range r.Finds {
		fmt.Fprintf(&b, "\n== find %d: schedule %d on %s: %s\n", i+1, f.Index, f.Target, strings.Join(f.Failed, ", "))
		fmt.Fprintf(&b, "   again: snowchaos explore --seed %d --schedule %d --target %s\n", r.Seed, f.Index, f.Target)
		if f.Shrunk == nil {
			b.WriteString("   not shrunk\n")
			continue
		}
		fmt.Fprintf(&b, "   shrunk in %d runs: %d faults -> %d, %d nodes -> %d, %s -> %s; fails %s\n",
			f.ShrinkRuns, len(f.Original.Faults), len(f.Shrunk.Faults), len(f.Original.Nodes), len(f.Shrunk.Nodes),
			Dur(f.Original.Duration), Dur(f.Shrunk.Duration), strings.Join(f.ShrunkFailed, ", "))
		b.WriteString(SideBySide("original", f.Original.YAML(), "shrunk", f.Shrunk.YAML(), 62))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is "|by| 100µs..2s (12 back, 3 forward)".
func (m *MagRange) String() string {
	f := func(v float64) string {
		if m.Unit == "ppm" {
			return strconv.FormatFloat(v, 'g', 4, 64) + " ppm"
		}
		return time.Duration(v * 1e9).String()
	}
	return fmt.Sprintf("%s..%s (%d back, %d forward)", f(m.Min), f(m.Max), m.Back, m.Forward)
}

// SideBySide lays two texts out in two columns of width w.
func SideBySide(ta, a, tb, bb string, w int) string {
	la := append([]string{"--- " + ta}, strings.Split(strings.TrimRight(a, "\n"), "\n")...)
	lb := append([]string{"--- " + tb}, strings.Split(strings.TrimRight(bb, "\n"), "\n")...)
	var out strings.Builder
	for i := range max(len(la), len(lb)) {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if len(x) > w-1 {
			x = x[:w-2] + "…"
		}
		fmt.Fprintf(&out, "   %-*s | %s\n", w, x, y)
	}
	return out.String()
}

// jsonReport is the report's JSON form.
type jsonReport struct {
	Seed       int64               `json:"seed"`
	Targets    []string            `json:"targets"`
	Schedules  int                 `json:"schedules"`
	Runs       int                 `json:"runs"`
	Passed     int                 `json:"passed"`
	Failed     int                 `json:"failed"`
	Unknown    int                 `json:"unknown"`
	Invalid    int                 `json:"invalid"`
	Seconds    float64             `json:"elapsed_seconds"`
	Stopped    bool                `json:"stopped,omitempty"`
	Stalled    bool                `json:"stalled,omitempty"`
	Kinds      map[string]int      `json:"kinds"`
	Combos     map[string]int      `json:"combinations"`
	Magnitudes map[string]MagRange `json:"magnitudes"`
	UnknownWhy map[string]int      `json:"unknown_reasons,omitempty"`
	Finds      []jsonFind          `json:"finds"`
	ExitCode   int                 `json:"exit_code"`
}

type jsonFind struct {
	Index        int      `json:"schedule"`
	Target       string   `json:"target"`
	Failed       []string `json:"failed"`
	Invariant    string   `json:"invariant"`
	Original     string   `json:"original_yaml"`
	Shrunk       string   `json:"shrunk_yaml,omitempty"`
	ShrinkRuns   int      `json:"shrink_runs,omitempty"`
	ShrunkFailed []string `json:"shrunk_failed,omitempty"`
	ShrunkFaults int      `json:"shrunk_faults,omitempty"`
	ShrunkLines  int      `json:"shrunk_lines,omitempty"`
}

// JSON writes the report as one JSON object.
func JSON(w io.Writer, r *Report) error {
	j := jsonReport{Seed: r.Seed, Targets: r.Targets, Schedules: r.Schedules, Runs: r.Runs, Passed: r.Passed, Failed: r.Failed,
		Unknown: r.Unknown, Invalid: r.Invalid, Seconds: r.Elapsed.Seconds(), Stopped: r.Stopped, Stalled: r.Stalled,
		Kinds: map[string]int{}, Combos: r.Combos, Magnitudes: map[string]MagRange{}, UnknownWhy: r.UnknownWhy, ExitCode: r.ExitCode()}
	for k, n := range r.Kinds {
		j.Kinds[string(k)] = n
	}
	for k, m := range r.Magnitudes {
		j.Magnitudes[string(k)] = *m
	}
	j.Finds = []jsonFind{}
	for _, f := range r.Finds {
		jf := jsonFind{Index: f.Index, Target: f.Target, Failed: f.Failed, Invariant: f.Key, Original: f.Original.YAML()}
		if f.Shrunk != nil {
			jf.Shrunk, jf.ShrinkRuns, jf.ShrunkFailed = f.Shrunk.YAML(), f.ShrinkRuns, f.ShrunkFailed
			jf.ShrunkFaults, jf.ShrunkLines = len(f.Shrunk.Faults), strings.Count(jf.Shrunk, "\n")
		}
		j.Finds = append(j.Finds, jf)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(j)
}
