package scenario

import (
	"strings"
	"testing"
)

func TestParseRealNA(t *testing.T) {
	base := `name: x
duration: 10s
nodes: [{name: a, worker: 1}]
load: {rate: 100/s}
invariants: ["duplicates == 0"]
`
	s, err := Parse("x.yaml", []byte(base+"real_na: 26 h of scenario time\ntargets: [wait, {name: bad-seq-reset-first, real_na: \" needs a 1 ms race \"}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.RealNA != "26 h of scenario time" || s.Targets[0].RealNA != "" || s.Targets[1].RealNA != "needs a 1 ms race" {
		t.Fatalf("real_na: scenario %q, targets %q %q", s.RealNA, s.Targets[0].RealNA, s.Targets[1].RealNA)
	}
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty", base + "real_na: \"  \"\n", `6: real_na: empty: say why`},
		{"null", base + "real_na:\n", `6: real_na: want a reason`},
		{"list", base + "real_na: [a]\n", `6: real_na: want a reason`},
		{"too long", base + "real_na: " + strings.Repeat("x", MaxRealNA+1) + "\n", `6: real_na: 301 characters: at most 300`},
		{"target empty", base + "targets: [{name: wait, real_na: \"\"}]\n", `6: targets[0].real_na: empty`},
		{"misspelled", base + "real_nа: x\n", `unknown key`},
	} {
		_, err := Parse("x.yaml", []byte(tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.name, err, tc.want)
		}
	}
}
