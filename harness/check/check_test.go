package check

import (
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness"
	"github.com/snowchaos/snowchaos/harness/scenario"
)

// TestSuiteParses: every fault's scenario is an ordinary scenario file
// that parses, with the command and its protocol carried over exactly
// (arguments with spaces and quotes too), for stdio and HTTP.
func TestSuiteParses(t *testing.T) {
	for _, cfg := range []Config{
		{Command: []string{"node", "my wrapper.js", `--name="x"`}, Dir: "/srv/ids", Ready: "ready", ID: scenario.IDDecimal,
			Layout: "41/10/12", Epoch: "2024-01-01T00:00:00Z", StartTime: 2 * time.Second, Env: []string{"MODE=fast"}},
		{Command: []string{"./idgen"}, Dir: "/srv", Protocol: scenario.ProtocolHTTP, URL: "http://127.0.0.1:{port}/ids?n={n}",
			Format: scenario.FormatJSONArray, TimeURL: "http://127.0.0.1:{port}/time", ID: "uuidv7", WorkerEnv: "NODE_ID"},
	} {
		files, err := Suite(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(files) != len(Faults) {
			t.Fatalf("%d files, want one per fault (%d)", len(files), len(Faults))
		}
		for i, f := range files {
			s, err := scenario.Parse(f.Name+".yaml", []byte(f.Text))
			if err != nil {
				t.Fatalf("%s does not parse: %v\n%s", f.Name, err, f.Text)
			}
			if f.Name != Faults[i] || s.Name != "check-"+f.Name || s.Mode != scenario.ModeReal {
				t.Errorf("file %d: %s / %s, mode %s", i, f.Name, s.Name, s.Mode)
			}
			x := s.Targets[0].Exec
			if strings.Join(x.Command, "|") != strings.Join(cfg.Command, "|") || x.Dir != cfg.Dir || x.Protocol != cmpOr(cfg.Protocol, scenario.ProtocolStdio) {
				t.Errorf("%s: command %q in %s over %s, want %q in %s", f.Name, x.Command, x.Dir, x.Protocol, cfg.Command, cfg.Dir)
			}
			if cfg.Protocol == scenario.ProtocolHTTP && (x.URL != cfg.URL || x.TimeURL != cfg.TimeURL || x.ID != "uuidv7") {
				t.Errorf("%s: http block %+v", f.Name, x)
			}
			env := map[string]string{}
			for _, e := range x.Env {
				env[e.Name] = e.Value
			}
			if env[cmpOr(cfg.WorkerEnv, DefaultWorkerEnv)] != "{worker}" {
				t.Errorf("%s: env %v lacks the worker ID", f.Name, env)
			}
			if f.Name == "restart-after-rewind" && s.Duration < 3*cfg.StartTime {
				t.Errorf("%s: a %s run for a process that takes %s to start", f.Name, s.Duration, cfg.StartTime)
			}
		}
	}
	if _, err := Suite(Config{}, nil); err == nil {
		t.Error("a config without a command made a suite")
	}
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// TestVerdict: a row that broke a promise fails the check, an unknown
// row leaves it unknown, and a broken promise the generator does not make
// does not count.
func TestVerdict(t *testing.T) {
	rows := []Row{
		{Fault: "step-back-small", Verdict: harness.Pass},
		{Fault: "restart-after-rewind", Verdict: harness.Fail, Broken: []string{PromiseRestart}},
	}
	if code, s := Verdict(rows, []string{PromiseUnique, PromiseOrdered}); code != 0 || !strings.HasPrefix(s, "PASS") {
		t.Errorf("a restart violation without the restart promise: %d %s", code, s)
	}
	if code, s := Verdict(rows, Promises); code != 1 || !strings.Contains(s, "restart-after-rewind (restart)") {
		t.Errorf("with the restart promise: %d %s", code, s)
	}
	rows = append(rows, Row{Fault: "frozen-clock", Verdict: harness.Unknown})
	if code, s := Verdict(rows, []string{PromiseUnique}); code != 2 || !strings.Contains(s, "frozen-clock") {
		t.Errorf("an unknown row: %d %s", code, s)
	}
}

// TestDetectKind: the strictest kind every ID parses as.
func TestDetectKind(t *testing.T) {
	for _, c := range []struct {
		ids  []string
		want string
	}{
		{[]string{"387380156651548672", "387380156651548673"}, "decimal"},
		{[]string{"01890a5d-ac96-774b-bcce-b302099a8057"}, "uuidv7"},
		{[]string{"9b2c6a4e-7d0f-4c55-9f1e-0d6e3b1c2a47"}, "uuidv4"},
		{[]string{"01890a5d-ac96-174b-bcce-b302099a8057"}, "uuid"},
		{[]string{"01ARZ3NDEKTSV4RRFFQ69G5FAV"}, "ulid"},
		{[]string{"order-42", "387380156651548672"}, "string"},
	} {
		if got, _ := detectKind(c.ids); got != c.want {
			t.Errorf("detectKind(%q) = %s, want %s", c.ids, got, c.want)
		}
	}
}

// TestDetectLayout: the preset whose node field holds the worker ID, and
// the epoch snapped to a known or round one when the IDs' time gives it
// within two seconds; otherwise kept and called a guess.
func TestDetectLayout(t *testing.T) {
	now := time.Date(2026, 12, 5, 1, 0, 0, 0, time.UTC)
	idAt := func(l generator.Layout, epoch, at time.Time) string {
		l.Epoch = epoch
		l = l.Normalize()
		id, err := l.Compose(l.TickOf(at.UnixNano()), Worker, 7)
		if err != nil {
			t.Fatal(err)
		}
		return id.String()
	}
	def := generator.DefaultLayout()
	twitter := time.UnixMilli(1288834974657).UTC()
	for _, c := range []struct {
		name               string
		ids                []string
		wantLayout, wantEp string
		wantWhy            string
	}{
		{"a midnight epoch", []string{idAt(def, time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC), now.Add(-30*time.Millisecond))}, "41/10/12", "2024-01-01T00:00:00Z", "midnight"},
		{"Twitter's", []string{idAt(def, twitter, now)}, "41/10/12", twitter.Format(time.RFC3339Nano), "Twitter"},
		{"an odd epoch", []string{idAt(def, time.Date(2021, 3, 4, 5, 6, 7, 0, time.UTC), now)}, "41/10/12", "2021-03-04T05:06:07Z", "no round epoch"},
		{"42/8/13", []string{idAt(generator.Presets()[2], time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), now)}, "42/8/13", "2025-01-01T00:00:00Z", "node field"},
	} {
		l, e, why := detectLayout(c.ids, "", "", now)
		if l != c.wantLayout || e != c.wantEp || !strings.Contains(why, c.wantWhy) {
			t.Errorf("%s: layout %s, epoch %s (%s); want %s, %s, saying %q", c.name, l, e, why, c.wantLayout, c.wantEp, c.wantWhy)
		}
	}
}
