package report

import (
	"fmt"
	"html"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/harness"
)

// HTML writes the report as one static page with inline CSS and SVG and
// no external resources, so it opens from disk without a server or a
// network. Per scenario it shows the matrix of targets and checks, and per
// run a timeline: IDs per second per node, each node's clock offset and
// the embedded-time lead, with the fault windows shaded and duplicates
// marked. Runs need Options.Timeline to carry their series; runs without
// one show the matrix only.
func HTML(w io.Writer, rep *harness.Report) error {
	ew := &errWriter{w: w}
	ew.printf("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<title>snowchaos report: %s</title>\n<style>%s</style></head><body>\n", html.EscapeString(strings.ToUpper(string(rep.Verdict))), css)
	s := rep.Summary
	ew.printf("<h1>snowchaos report <span class=\"v %s\">%s</span></h1>\n", rep.Verdict, strings.ToUpper(string(rep.Verdict)))
	ew.printf("<p class=\"sum\">%d scenarios, %d runs (%s mode): %d passed, %d failed, %d unknown, %d n/a, %d skipped. Exit code %d.</p>\n",
		len(rep.Scenarios), s.Runs, html.EscapeString(string(rep.Mode)), s.Passed, s.Failed, s.Unknown, s.NotApplicable, s.Skipped, rep.ExitCode())
	if c := rep.Calibration; c != nil {
		ew.printf("<p class=\"cal\">%s</p>\n", html.EscapeString(c.String()))
	}
	ew.printf("<nav>")
	for _, sr := range rep.Scenarios {
		ew.printf("<a class=\"%s\" href=\"#%s\">%s</a> ", verdictClass(sr.Verdict), anchor(sr.Name), html.EscapeString(sr.Name))
	}
	ew.printf("</nav>\n<details class=\"howto\" open><summary>How to read the matrices</summary><dl>")
	for _, l := range legend {
		term := l[0]
		if term == "[n]" {
			term = "1, 2, …"
		}
		ew.printf("<dt>%s</dt><dd>%s</dd>", html.EscapeString(term), html.EscapeString(l[1]))
	}
	ew.printf("</dl></details>\n")
	for _, sr := range rep.Scenarios {
		htmlScenario(ew, sr)
	}
	ew.printf("<footer>Timelines: IDs per second per node (quiet periods of simulated runs are sampled), clock offset of each node's host, and how far issued IDs' embedded time ran ahead of true time; shaded bands are fault windows, red marks are duplicates. Each node has its own colour; the nodes' lines are drawn a little apart (at most 4.5 units either side of the true value, on a panel 120 units high) so that coincident series stay visible side by side.</footer>\n</body></html>\n")
	return ew.err
}

// css styles the page; on a narrow page the timelines' text grows (in SVG
// units) to stay legible as the SVG scales down.
var css = `body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px;color:#1d2330;background:#fff;overflow-wrap:anywhere}
h1{font-size:22px}h2{font-size:18px;margin-top:32px;border-top:2px solid #d8dce6;padding-top:12px}
.sum{color:#444}nav a{margin-right:8px;text-decoration:none}nav a.pass{color:#1a7f37}nav a.fail{color:#cf222e}nav a.unknown{color:#9a6700}nav a.na{color:#57606a}
.v{padding:1px 8px;border-radius:4px;color:#fff;font-size:13px}.v.pass{background:#1a7f37}.v.fail{background:#cf222e}.v.unknown{background:#9a6700}.v.na{background:#57606a}
.scroll{overflow-x:auto;max-width:100%}table{border-collapse:collapse;margin:8px 0}td,th{border:1px solid #d8dce6;padding:3px 7px;text-align:right;font-variant-numeric:tabular-nums;overflow-wrap:normal}
th{background:#f3f4f8}td.l,th.l{text-align:left}td.pass{color:#1a7f37}td.fail{color:#cf222e;font-weight:600}td.unknown{color:#9a6700;font-weight:600}td.info{color:#888}td.na{color:#57606a;font-style:italic}
.legend li{font-family:ui-monospace,monospace}details{margin:6px 0}summary{cursor:pointer}.desc{color:#444;max-width:900px}
.howto dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:6px 0 0 16px;max-width:900px}.howto dt{font-family:ui-monospace,monospace}.howto dd{margin:0}
svg.timeline{display:block;width:100%;max-width:` + strconv.Itoa(svgW) + `px;height:auto;background:#fbfbfd;border:1px solid #e1e4ec}
footer{margin-top:40px;color:#666;font-size:12px}
@media (max-width:700px){body{margin:8px}svg.timeline text{font-size:` + strconv.Itoa(narrowFont) + `px}}`

// verdictClass is a verdict's CSS class ("n/a" is not a class name).
func verdictClass(v harness.Verdict) string {
	if v == harness.NA {
		return "na"
	}
	return string(v)
}

func anchor(s string) string {
	return "s-" + strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '_'
	}, s)
}

func htmlScenario(w *errWriter, sr *harness.ScenarioResult) {
	w.printf("<h2 id=\"%s\">%s <span class=\"v %s\">%s</span></h2>\n", anchor(sr.Name), html.EscapeString(sr.Name), verdictClass(sr.Verdict), strings.ToUpper(string(sr.Verdict)))
	if sr.Description != "" {
		w.printf("<p class=\"desc\">%s</p>\n", html.EscapeString(sr.Description))
	}
	w.printf("<p>%s, seed %d, <code>%s</code>", sr.Duration, sr.Seed, html.EscapeString(sr.File))
	for _, f := range sr.Faults {
		w.printf("; %s (%s) at %s on %s", html.EscapeString(f.Name), html.EscapeString(f.Kind), f.At, html.EscapeString(strings.Join(f.Nodes, ", ")))
	}
	w.printf("</p>\n")
	cols := columns(sr)
	notes := columnNotes(sr)
	w.printf("<ol class=\"legend\">")
	for _, c := range cols {
		if n := notes[c]; n != "" {
			w.printf("<li>%s <small>(%s)</small></li>", html.EscapeString(c), html.EscapeString(n))
			continue
		}
		w.printf("<li>%s</li>", html.EscapeString(c))
	}
	w.printf("</ol>\n<div class=\"scroll\"><table><tr><th class=\"l\">target</th><th>verdict</th><th>IDs</th><th>duplicates</th><th>max wait</th><th>max lead</th><th>availability</th>")
	for i := range cols {
		w.printf("<th>%d</th>", i+1)
	}
	w.printf("</tr>\n")
	for _, r := range sr.Runs {
		f := r.Figures
		if r.Verdict == harness.NA {
			w.printf("<tr><td class=\"l\">%s</td><td class=\"na\" title=\"%s\">n/a</td><td class=\"l na\" colspan=\"%d\">%s</td></tr>\n",
				html.EscapeString(r.Target), html.EscapeString(r.NotApplicable), 5+len(cols), html.EscapeString("not applicable: "+r.NotApplicable))
			continue
		}
		w.printf("<tr><td class=\"l\">%s</td><td class=\"%s\">%s</td><td>%d</td><td>%d</td><td>%s</td><td>%s</td><td>%.4f</td>",
			html.EscapeString(r.Target), r.Verdict, runVerdict(r), f.IDs, f.Duplicates, f.MaxWait, maxLead(r), f.Availability)
		cells := map[string]harness.Check{}
		for _, c := range r.Checks {
			cells[colKey(c)] = c
		}
		for _, k := range cols {
			c, ok := cells[k]
			switch {
			case !ok:
				w.printf("<td class=\"info\">-</td>")
			case c.Info:
				w.printf("<td class=\"info\" title=\"%s\">(%s)</td>", html.EscapeString("observed "+c.Observed), c.Verdict)
			default:
				title := "observed " + c.Observed
				if c.Bound != "" {
					title += ", judged as " + c.Bound
				}
				if c.Reason != "" {
					title += ": " + c.Reason
				}
				class := string(c.Verdict)
				if c.Verdict == harness.NA {
					class = "na"
				}
				w.printf("<td class=\"%s\" title=\"%s\">%s</td>", class, html.EscapeString(title), checkVerdict(c))
			}
		}
		w.printf("</tr>\n")
	}
	w.printf("</table></div>\n")
	for _, r := range sr.Runs {
		if r.Verdict == harness.NA {
			continue
		}
		w.printf("<details open><summary>%s: %s", html.EscapeString(r.Target), runVerdict(r))
		if r.Control {
			w.printf(" (negative control)")
		}
		if r.Error != "" {
			w.printf(" (%s)", html.EscapeString(firstLine(r.Error)))
		}
		w.printf("</summary>\n")
		if note := kindNote(r); note != "" {
			w.printf("<div>%s</div>\n", html.EscapeString(note))
		}
		if r.Real != nil {
			w.printf("<div>real mode: %s</div>\n", html.EscapeString(r.Real.String()))
		}
		for _, why := range r.Unknown {
			w.printf("<div class=\"unknown\">unknown: %s</div>\n", html.EscapeString(why))
		}
		for _, v := range r.Protocol {
			w.printf("<div>protocol violation: %s#%d (pid %d): %s</div>\n", html.EscapeString(v.Node), v.Incarnation, v.PID, html.EscapeString(v.Detail))
		}
		for _, line := range incarnationLines(r) {
			w.printf("<div>node %s</div>\n", html.EscapeString(line))
		}
		for _, f := range r.Faults {
			state := "confirmed"
			if !f.Confirmed {
				state = "NOT confirmed"
			}
			w.printf("<div>fault %s: %s: %s</div>\n", html.EscapeString(f.Name), state, html.EscapeString(strings.Join(f.Detail, "; ")))
		}
		for _, d := range r.Duplicates {
			w.printf("<div>duplicate %s: %s at %s, again %s at %s</div>\n", html.EscapeString(d.ID), html.EscapeString(d.First), d.FirstAt, html.EscapeString(d.Second), d.SecondAt)
		}
		if l := r.Lease; l != nil {
			w.printf("<div>%s</div>\n", html.EscapeString(leaseLine(sr, r)))
			for _, line := range l.Refused {
				w.printf("<div>refused: %s</div>\n", html.EscapeString(line))
			}
			for _, line := range l.Rebound {
				w.printf("<div>rebound: %s</div>\n", html.EscapeString(line))
			}
		}
		if r.Timeline != nil {
			timelineSVG(w, sr, r)
		}
		w.printf("</details>\n")
	}
}

// palette gives each node of a timeline its own colour (8, then repeated
// with a dash).
var palette = []string{"#0969da", "#d1242f", "#1a7f37", "#8250df", "#bc4c00", "#0e7490", "#bf3989", "#57606a"}

// The timeline's geometry, in SVG user units. The SVG scales to the width
// of the page (at most svgW CSS pixels); on a narrow page its text is set
// at narrowFont units instead of svgFont so that it stays legible scaled
// down, and every margin leaves room for text of that size (labelW
// estimates a label's width at it).
const (
	svgW       = 1100
	svgFont    = 11
	narrowFont = 22
	panelH     = 120
	panelGap   = 40
	minMarginL = 60
	marginR    = 40
	marginTop  = 40
	legendRowH = 30
)

// labelW estimates the width of text at the larger of the two font sizes.
func labelW(text string) float64 { return 0.66 * narrowFont * float64(len([]rune(text))) }

// lane is the vertical offset of node i of n, in SVG units: lines of
// different nodes are drawn side by side, a little apart, so that nodes
// whose series coincide (every node stepped by the same leap) still show
// each colour instead of the last node drawn hiding the others.
func lane(i, n int) float64 {
	if n < 2 {
		return 0
	}
	step := min(2.4, 9/float64(n-1))
	return step * (float64(i) - float64(n-1)/2)
}

// dash is the dash pattern of node i: solid, dashed once the palette
// repeats.
func dash(i int) string {
	if i >= len(palette) {
		return ` stroke-dasharray="7 4"`
	}
	return ""
}

// timelineSVG draws three panels sharing the time axis, with a legend of
// the nodes under it.
func timelineSVG(w *errWriter, sr *harness.ScenarioResult, r *harness.Result) {
	tl := r.Timeline
	dur := time.Duration(sr.Duration)
	if tl.Buckets == 0 || dur <= 0 {
		return
	}
	bucketSec := tl.Bucket.Seconds()
	panels := []struct {
		title string
		unit  string
		val   func(ns *harness.NodeSeries, i int) (float64, bool)
	}{
		{"IDs per second", "/s", func(ns *harness.NodeSeries, i int) (float64, bool) { return float64(ns.IDs[i]) / bucketSec, true }},
		{"clock offset", "ms", func(ns *harness.NodeSeries, i int) (float64, bool) {
			return float64(ns.Offset[i]) / 1e6, ns.Known[i]
		}},
		{"embedded-time lead", "ms", func(ns *harness.NodeSeries, i int) (float64, bool) { return float64(ns.Lead[i]) / 1e6, ns.IDs[i] > 0 }},
	}
	// Each panel's range, and a left margin wide enough for its labels.
	ranges := make([][2]float64, len(panels))
	left := float64(minMarginL)
	for pi, p := range panels {
		lo, hi := 0.0, 0.0
		for _, ns := range tl.Nodes {
			for i := 0; i < tl.Buckets; i++ {
				if v, ok := p.val(ns, i); ok {
					lo, hi = math.Min(lo, v), math.Max(hi, v)
				}
			}
		}
		if hi-lo < 1e-9 {
			hi = lo + 1
		}
		ranges[pi] = [2]float64{lo, hi}
		left = math.Max(left, math.Ceil(8+math.Max(labelW(fmtAxis(lo, p.unit)), labelW(fmtAxis(hi, p.unit)))))
	}
	// Legend layout first: it may take several rows.
	type entry struct{ x, y float64 }
	entries := make([]entry, len(tl.Nodes))
	lx, row := left, 0
	for ni, ns := range tl.Nodes {
		wd := 34 + labelW(ns.Name) + 20
		if lx+wd > svgW-marginR && lx > left {
			lx, row = left, row+1
		}
		entries[ni] = entry{lx, float64(row)}
		lx += wd
	}
	axisY := marginTop + 3*panelH + 2*panelGap + 28
	height := axisY + 14 + (row+1)*legendRowH
	plotW := svgW - left - marginR
	x := func(t time.Duration) float64 { return left + plotW*float64(t)/float64(dur) }
	w.printf("<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %d %d\" font-size=\"%d\" font-family=\"system-ui,sans-serif\" role=\"img\" aria-label=\"timeline of %s\">\n",
		svgW, height, svgFont, html.EscapeString(r.Target))
	// Fault windows, labelled at their start, or ending at the right edge
	// when the name would run past it.
	for _, f := range sr.Faults {
		x0, x1 := x(time.Duration(f.At)), x(time.Duration(f.End))
		if x1-x0 < 2 {
			x1 = x0 + 2
		}
		w.printf("<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" fill=\"#f4a261\" fill-opacity=\"0.22\"/>", x0, marginTop-8, x1-x0, 3*panelH+2*panelGap+8)
		if x0+2+labelW(f.Name) <= svgW-4 {
			w.printf("<text x=\"%.1f\" y=\"%d\" fill=\"#9c4a00\">%s</text>\n", x0+2, marginTop-14, html.EscapeString(f.Name))
		} else {
			w.printf("<text x=\"%d\" y=\"%d\" fill=\"#9c4a00\" text-anchor=\"end\">%s</text>\n", svgW-4, marginTop-14, html.EscapeString(f.Name))
		}
	}
	for pi, p := range panels {
		top := float64(marginTop + pi*(panelH+panelGap))
		lo, hi := ranges[pi][0], ranges[pi][1]
		y := func(v float64) float64 { return top + panelH - (v-lo)/(hi-lo)*panelH }
		w.printf("<rect x=\"%.0f\" y=\"%.0f\" width=\"%.0f\" height=\"%d\" fill=\"none\" stroke=\"#c9cdd8\"/>", left, top, plotW, panelH)
		w.printf("<text x=\"%.0f\" y=\"%.0f\" font-weight=\"600\">%s</text>", left, top-5, p.title)
		w.printf("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\" dominant-baseline=\"hanging\">%s</text>", left-6, top, fmtAxis(hi, p.unit))
		w.printf("<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%s</text>", left-6, top+panelH, fmtAxis(lo, p.unit))
		if lo < 0 && hi > 0 {
			w.printf("<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.1f\" y2=\"%.1f\" stroke=\"#c9cdd8\" stroke-dasharray=\"3 3\"/>", left, left+plotW, y(0), y(0))
		}
		for ni, ns := range tl.Nodes {
			var b strings.Builder
			pen := false
			for i := ns.From; i < tl.Buckets; i++ {
				v, ok := p.val(ns, i)
				if !ok {
					pen = false
					continue
				}
				t := time.Duration(i)*tl.Bucket + tl.Bucket/2
				if pen {
					b.WriteString(" L")
				} else {
					b.WriteString(" M")
				}
				fmt.Fprintf(&b, "%.1f %.1f", x(t), y(v)+lane(ni, len(tl.Nodes)))
				pen = true
			}
			if b.Len() > 0 {
				w.printf("<path data-node=\"%s\" d=\"%s\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.6\" stroke-linejoin=\"round\"%s/>\n",
					html.EscapeString(ns.Name), strings.TrimSpace(b.String()), palette[ni%len(palette)], dash(ni))
			}
		}
	}
	// Duplicates on the first panel.
	for _, d := range tl.Duplicates {
		xx := x(d)
		w.printf("<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%d\" y2=\"%d\" stroke=\"#cf222e\" stroke-width=\"1.5\"/>", xx, xx, marginTop, marginTop+panelH)
	}
	if len(tl.Duplicates) > 0 {
		w.printf("<text x=\"%.1f\" y=\"%d\" fill=\"#cf222e\" stroke=\"#fbfbfd\" stroke-width=\"4\" paint-order=\"stroke\" text-anchor=\"end\" dominant-baseline=\"hanging\" font-weight=\"600\">%d duplicates</text>", left+plotW-4, marginTop+4, r.Figures.Duplicates)
	}
	// Time axis.
	for k := 0; k <= 5; k++ {
		t := dur * time.Duration(k) / 5
		w.printf("<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%s</text>", x(t), axisY, harness.Duration(t))
	}
	// Legend: a line sample per node, drawn as in the panels.
	for ni, ns := range tl.Nodes {
		e := entries[ni]
		cy := float64(axisY) + 14 + e.y*legendRowH + legendRowH/2
		w.printf("<line x1=\"%.0f\" x2=\"%.0f\" y1=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" stroke-width=\"3\"%s/><text x=\"%.0f\" y=\"%.0f\" dominant-baseline=\"central\">%s</text>",
			e.x, e.x+28, cy, cy, palette[ni%len(palette)], dash(ni), e.x+34, cy, html.EscapeString(ns.Name))
	}
	w.printf("</svg>\n")
}

func fmtAxis(v float64, unit string) string {
	switch {
	case math.Abs(v) >= 1e6:
		return fmt.Sprintf("%.1fM%s", v/1e6, unit)
	case math.Abs(v) >= 1e4:
		return fmt.Sprintf("%.0fk%s", v/1e3, unit)
	case math.Abs(v) >= 10 || v == 0:
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.2f%s", v, unit)
}
