package report_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"html"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/report"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/internal/testenv"
)

const src = `name: demo
description: A step back on one node, a clone on the other.
duration: 2s
nodes:
  - {name: a, worker: 1, checkpoint: on, reserve: 50ms, lease: memory}
  - {name: b, worker: 2, checkpoint: on, reserve: 50ms, lease: memory}
load: {per: node, clients: 2, rate: 3000/s}
faults:
  - {at: 500ms, kind: step, by: -20ms, nodes: [a]}
  - {at: 1s, kind: clone, for: 300ms, nodes: [b]}
invariants: ["duplicates == 0", "availability >= 0.9 during step"]
targets: [wait, bad-no-rewind-check]
expect:
  bad-no-rewind-check: {duplicates: "> 0"}
`

// demo runs the scenarios given as YAML, with timelines.
func demo(t *testing.T, srcs ...string) *harness.Report {
	t.Helper()
	var suite []*scenario.Scenario
	for i, y := range srcs {
		s, err := scenario.Parse(fmt.Sprintf("demo-%d.yaml", i), []byte(y))
		if err != nil {
			t.Fatal(err)
		}
		suite = append(suite, s)
	}
	rep, err := harness.Run(context.Background(), suite, harness.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestJUnit(t *testing.T) {
	rep := demo(t, src)
	var b bytes.Buffer
	if err := report.JUnit(&b, rep); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests  int `xml:"tests,attr"`
		Suites []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string    `xml:"name,attr"`
				Failure *struct{} `xml:"failure"`
				Skipped *struct{} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b.Bytes(), &doc); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	want := 0
	for _, r := range rep.Scenarios[0].Runs {
		want += len(r.Checks)
	}
	if len(doc.Suites) != 1 || doc.Suites[0].Name != "demo" || len(doc.Suites[0].Cases) != want || doc.Tests != want {
		t.Fatalf("junit: %+v (want %d cases)", doc, want)
	}
	names := map[string]bool{}
	for _, c := range doc.Suites[0].Cases {
		names[c.Name] = true
		if c.Failure != nil {
			t.Fatalf("failure in a passing report: %s", c.Name)
		}
	}
	for _, n := range []string{"wait: duplicates == 0", "bad-no-rewind-check: expect duplicates > 0"} {
		if !names[n] {
			t.Fatalf("no test case %q in %v", n, names)
		}
	}
}

func TestHTMLSelfContained(t *testing.T) {
	var b bytes.Buffer
	if err := report.HTML(&b, demo(t, src)); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, banned := range []string{"http://", "https://", "<script", "<link", "@import", "src="} {
		if i := strings.Index(page, banned); i >= 0 && !strings.Contains(page[max(i-40, 0):i], "xmlns=") {
			t.Fatalf("the page refers to something outside itself: %q", page[max(i-40, 0):min(i+60, len(page))])
		}
	}
	for _, want := range []string{"<svg", "IDs per second", "clock offset", "embedded-time lead", "duplicates", ">step<", ">clone<"} {
		if !strings.Contains(page, want) {
			t.Fatalf("the page lacks %q", want)
		}
	}
}

// coincident has three nodes whose series coincide (one leap on all of
// them), a caught negative control with duplicates, and a fault whose name
// would run past the right edge of the timeline if drawn at its start.
const coincident = `name: coincident
duration: 2s
start: 2026-12-31T23:59:59Z
nodes:
  - {name: a, worker: 1}
  - {name: b, worker: 2}
  - {name: c, worker: 3}
load: {per: node, clients: 1, rate: 1000/s}
faults:
  - {at: 1s, kind: leap, nodes: all}
  - {name: a-late-freeze-near-the-end, at: 1950ms, kind: freeze, for: 20ms, nodes: [a]}
invariants: ["duplicates == 0"]
targets: [logical, bad-no-rewind-check]
expect:
  bad-no-rewind-check: {duplicates: "> 0"}
`

// layoutCheck runs in a page that holds the report in an iframe of the
// width under test, and writes what it found into #out as JSON: whether
// the page scrolls sideways, every timeline text that is not wholly
// inside its SVG and the window, the closed <details>, and every node line
// that is not on top (visible) at a third or more of 40 points along it
// (a line hidden under another node's coincident line).
const layoutCheck = `<script>
window.addEventListener('load', () => {
  const out = {overflow: '', clipped: [], closed: 0, hidden: [], timelines: 0, lines: 0};
  const d = document.getElementById('report').contentDocument;
  const vw = d.documentElement.clientWidth;
  if (d.documentElement.scrollWidth > vw) out.overflow = 'the page is ' + d.documentElement.scrollWidth + 'px wide in a ' + vw + 'px window';
  out.closed = d.querySelectorAll('details:not([open])').length;
  d.querySelectorAll('svg.timeline').forEach((svg, si) => {
    out.timelines++;
    const vb = svg.viewBox.baseVal;
    svg.querySelectorAll('text').forEach(t => {
      const b = t.getBBox(), r = t.getBoundingClientRect();
      if (b.x < -0.5 || b.y < -0.5 || b.x + b.width > vb.width + 0.5 || b.y + b.height > vb.height + 0.5 || r.left < -0.5 || r.right > vw + 0.5)
        out.clipped.push('timeline ' + si + ': "' + t.textContent + '" at x ' + b.x.toFixed(1) + '..' + (b.x + b.width).toFixed(1) + ' of ' + vb.width);
    });
    svg.scrollIntoView();
    const ctm = svg.getScreenCTM();
    svg.querySelectorAll('path[data-node]').forEach(p => {
      out.lines++;
      const len = p.getTotalLength();
      let seen = 0, tried = 0;
      for (let i = 0; i < 40; i++) {
        const q = p.getPointAtLength(len * (i + 0.5) / 40), pt = svg.createSVGPoint();
        pt.x = q.x; pt.y = q.y;
        const c = pt.matrixTransform(ctm);
        if (c.y < 0 || c.y >= d.documentElement.clientHeight) continue;
        tried++;
        if (d.elementFromPoint(c.x, c.y) === p) seen++;
      }
      if (tried > 0 && seen * 3 < tried) out.hidden.push('timeline ' + si + ' node ' + p.dataset.node + ': on top at ' + seen + ' of ' + tried + ' points');
    });
  });
  document.getElementById('out').textContent = JSON.stringify(out);
});
</script>`

// TestHTMLInChromium renders the report in headless Chromium at a desktop
// and a phone width. At each it checks, by script in the page, that the
// page does not scroll sideways, that no timeline label is cut off, that
// every run's timeline is open, and that every node's line can be seen
// where nodes' series coincide; and that the screenshot is not blank.
func TestHTMLInChromium(t *testing.T) {
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		testenv.Missing(t, "chromium (Debian package chromium) renders the HTML report")
	}
	rep := demo(t, src, coincident)
	var page bytes.Buffer
	if err := report.HTML(&page, rep); err != nil {
		t.Fatal(err)
	}
	timelines, lines := 0, 0 // a line per node and panel
	for _, sr := range rep.Scenarios {
		for _, r := range sr.Runs {
			timelines++
			lines += 3 * len(r.Timeline.Nodes)
		}
	}
	dir := t.TempDir()
	for _, width := range []int{1280, 480} {
		t.Run(strconv.Itoa(width), func(t *testing.T) {
			const height = 3000
			wrapper := filepath.Join(dir, fmt.Sprintf("at-%d.html", width))
			body := fmt.Sprintf("<!DOCTYPE html><html><head><meta charset=\"utf-8\"></head><body style=\"margin:0\"><iframe id=\"report\" style=\"width:%dpx;height:%dpx;border:0\" srcdoc=\"%s\"></iframe><pre id=\"out\"></pre>%s</body></html>",
				width, height, html.EscapeString(page.String()), layoutCheck)
			if err := os.WriteFile(wrapper, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			shot := filepath.Join(dir, fmt.Sprintf("shot-%d.png", width))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			// Headless windows are at least 500 px wide: the iframe sets the
			// width under test.
			cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
				"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
				"--user-data-dir="+filepath.Join(dir, fmt.Sprintf("profile-%d", width)), "--virtual-time-budget=5000",
				"--screenshot="+shot, "--dump-dom", fmt.Sprintf("--window-size=%d,%d", max(width, 500), height), "file://"+wrapper)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			dom, err := cmd.Output()
			if err != nil {
				t.Fatalf("chromium: %v\n%s", err, stderr.Bytes())
			}
			m := regexp.MustCompile(`<pre id="out">([^<]*)</pre>`).FindSubmatch(dom)
			if m == nil {
				t.Fatalf("the layout check wrote nothing:\n%s", stderr.Bytes())
			}
			var got struct {
				Overflow         string
				Clipped, Hidden  []string
				Closed           int
				Timelines, Lines int
			}
			if err := json.Unmarshal([]byte(html.UnescapeString(string(m[1]))), &got); err != nil {
				t.Fatalf("%v: %s", err, m[1])
			}
			if got.Timelines != timelines || got.Lines != lines {
				t.Fatalf("the check saw %d timelines and %d lines, want %d and %d", got.Timelines, got.Lines, timelines, lines)
			}
			if got.Overflow != "" {
				t.Errorf("%dpx: %s", width, got.Overflow)
			}
			for _, c := range got.Clipped {
				t.Errorf("%dpx: label cut off: %s", width, c)
			}
			if got.Closed > 0 {
				t.Errorf("%dpx: %d runs' timelines are closed", width, got.Closed)
			}
			for _, h := range got.Hidden {
				t.Errorf("%dpx: line hidden: %s", width, h)
			}
			notBlank(t, shot)
		})
	}
}

// notBlank fails t unless the screenshot has ink and colour.
func notBlank(t *testing.T, shot string) {
	t.Helper()
	pf, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer pf.Close()
	img, err := png.Decode(pf)
	if err != nil {
		t.Fatal(err)
	}
	bounds := img.Bounds()
	total, ink, colored := 0, 0, 0
	for y := bounds.Min.Y; y < bounds.Max.Y; y += 2 {
		for x := bounds.Min.X; x < bounds.Max.X; x += 2 {
			r, g, b, _ := img.At(x, y).RGBA()
			total++
			if r < 0xf000 || g < 0xf000 || b < 0xf000 {
				ink++
			}
			if max(r, g, b)-min(r, g, b) > 0x3000 {
				colored++
			}
		}
	}
	if float64(ink)/float64(total) < 0.02 || colored == 0 {
		t.Fatalf("the screenshot %s looks blank: %d of %d pixels not white, %d coloured", shot, ink, total, colored)
	}
	t.Logf("%s: %d of %d sampled pixels not white, %d coloured", shot, ink, total, colored)
}

// TestControlVerdicts: a negative control reads caught when the harness
// caught it and escaped when it did not, in every format; the JSON keeps
// its verdict field (pass or fail) beside the new control_verdict.
func TestControlVerdicts(t *testing.T) {
	const control = `name: NAME
duration: 1s
nodes: [{name: a, worker: 1}]
load: {rate: 2000/s}
FAULTS
invariants: ["duplicates == 0"]
targets: [wait, bad-no-rewind-check]
expect:
  bad-no-rewind-check: {duplicates: "> 0"}
`
	caught := strings.NewReplacer("NAME", "caught", "FAULTS", "faults: [{at: 300ms, kind: step, by: -50ms}]").Replace(control)
	escaped := strings.NewReplacer("NAME", "escaped", "FAULTS", "").Replace(control) // no step: no duplicates to catch
	rep := demo(t, caught, escaped)
	render := func(f func(io.Writer, *harness.Report) error) string {
		var b bytes.Buffer
		if err := f(&b, rep); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	for _, tc := range []struct {
		format string
		out    string
		want   []*regexp.Regexp
	}{
		{"terminal", render(report.Terminal), []*regexp.Regexp{
			regexp.MustCompile(`(?m)^== caught  \[PASS\][\s\S]*^   bad-no-rewind-check  caught .* caught$`),
			regexp.MustCompile(`(?m)^== escaped  \[FAIL\][\s\S]*^   bad-no-rewind-check  escaped .* escaped$`),
			regexp.MustCompile(`(?m)^  caught   a negative control did what the scenario expects of it`),
			regexp.MustCompile(`4 runs: 3 passed \(1 of them negative controls caught\), 1 failed`),
		}},
		{"json", render(report.JSON), []*regexp.Regexp{
			regexp.MustCompile(`"control_verdict": "caught",\s+"target": "bad-no-rewind-check",[\s\S]*?"verdict": "pass"`),
			regexp.MustCompile(`"control_verdict": "escaped",\s+"target": "bad-no-rewind-check",[\s\S]*?"verdict": "fail"`),
		}},
		{"junit", render(report.JUnit), []*regexp.Regexp{
			regexp.MustCompile(`<system-out>caught \(negative control\): observed`),
			regexp.MustCompile(`<failure message="escaped: the harness did not catch the negative control: duplicates &gt; 0: observed 0"`),
		}},
		{"html", render(report.HTML), []*regexp.Regexp{
			regexp.MustCompile(`<td class="pass">caught</td>`),
			regexp.MustCompile(`<td class="fail">escaped</td>`),
			regexp.MustCompile(`<summary>bad-no-rewind-check: escaped \(negative control\)`),
			regexp.MustCompile(`<dt>escaped</dt>`),
		}},
	} {
		for _, re := range tc.want {
			if !re.MatchString(tc.out) {
				t.Errorf("%s output does not match %s:\n%s", tc.format, re, tc.out)
			}
		}
	}
	if strings.Contains(render(report.Terminal), "bad-no-rewind-check  pass ") {
		t.Error("the terminal matrix still calls a negative control pass")
	}
}

func TestProgress(t *testing.T) {
	var b bytes.Buffer
	now := time.Unix(0, 0)
	p := report.NewProgress(&b, 2, func() time.Time { now = now.Add(time.Second); return now })
	p.Update(harness.Progress{Scenario: "s", Target: "wait", Elapsed: time.Second, Duration: 2 * time.Second, IDs: 10, Faults: []string{"step"}})
	if !strings.Contains(b.String(), "[0/2] s / wait   50.0% of 2s  ids 10  dups 0  faults step") {
		t.Fatalf("%q", b.String())
	}
	p.Clear()
	if !strings.HasSuffix(b.String(), "\r") {
		t.Fatalf("%q", b.String())
	}
}

// TestEvidenceInEveryReport: why a run is unknown beyond its checks (an
// incarnation that never served, a protocol violation) is in the text,
// JSON, JUnit and HTML reports alike, with the incarnation's figures.
func TestEvidenceInEveryReport(t *testing.T) {
	rep := demo(t, src)
	r := rep.Scenarios[0].Runs[0]
	r.Verdict = harness.Unknown
	r.Unknown = []string{"node a incarnation 1 (started at 400ms, ready after 2.019s) never served: 446 requests, 0 IDs",
		"protocol violation (1 in all): a#0 (pid 42): line 3 of the answer to \"10\" is not a snowflake ID"}
	r.Protocol = []harness.ViolationResult{{Node: "a", Incarnation: 0, PID: 42, Detail: "line 3 of the answer to \"10\" is not a snowflake ID"}}
	r.Nodes = append(r.Nodes, harness.NodeResult{Name: "a", Incarnation: 1, Worker: 1, Started: true,
		StartedAt: harness.Duration(400 * time.Millisecond), ReadyAfter: harness.Duration(2019 * time.Millisecond), Requests: 446})
	for _, f := range []struct {
		name   string
		render func(io.Writer, *harness.Report) error
		want   []string
	}{
		{"text", report.Terminal, []string{"unknown: node a incarnation 1", "a#1 (worker 1): started at 400ms, ready after 2.019s: 446 requests, 0 IDs (never served)", "UNKNOWN: protocol violation"}},
		{"json", report.JSON, []string{`"unknown_reasons"`, `"protocol_violations"`, `"ready_after_seconds": 2.019`}},
		{"junit", report.JUnit, []string{`name="wait: evidence"`, "unknown: node a incarnation 1", "protocol violation: a#0 (pid 42)"}},
		{"html", report.HTML, []string{"unknown: node a incarnation 1", "protocol violation: a#0 (pid 42)", "(never served)"}},
	} {
		var b bytes.Buffer
		if err := f.render(&b, rep); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		if f.name == "html" || f.name == "junit" {
			out = html.UnescapeString(out)
		}
		for _, w := range f.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s report lacks %q", f.name, w)
			}
		}
	}
}
