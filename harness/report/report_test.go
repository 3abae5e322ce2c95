package report_test

import (
	"bytes"
	"context"
	"encoding/xml"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
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

func demo(t *testing.T) *harness.Report {
	t.Helper()
	s, err := scenario.Parse("demo.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	rep, err := harness.Run(context.Background(), []*scenario.Scenario{s}, harness.Options{Timeline: true})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestJUnit(t *testing.T) {
	rep := demo(t)
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
	if err := report.HTML(&b, demo(t)); err != nil {
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

// TestHTMLRendersInChromium renders the report in headless Chromium and
// checks the screenshot is not blank.
func TestHTMLRendersInChromium(t *testing.T) {
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
	dir := t.TempDir()
	page := filepath.Join(dir, "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := report.HTML(f, demo(t)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	shot := filepath.Join(dir, "shot.png")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+filepath.Join(dir, "profile"), "--screenshot="+shot, "--window-size=1400,2000", "file://"+page)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	pf, err := os.Open(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
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
		t.Fatalf("the screenshot looks blank: %d of %d pixels not white, %d coloured", ink, total, colored)
	}
	t.Logf("%d of %d sampled pixels not white, %d coloured", ink, total, colored)
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
