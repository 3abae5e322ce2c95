package harness

import (
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// TestOverlapEvidence: a clone sharing its source's worker ID confirms
// the fault only if the two issued IDs in a tick in common; a clone that
// served only in ticks its source did not use leaves it unconfirmed.
func TestOverlapEvidence(t *testing.T) {
	layout := generator.DefaultLayout()
	idAt := func(ms int) generator.ID {
		id, err := layout.Compose(int64(ms), 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	for _, tc := range []struct {
		name       string
		src, clone []int // the ms of each call's one ID
		confirmed  bool
	}{
		{"shared", []int{1, 2, 3}, []int{3, 4}, true},
		{"apart", []int{1, 2, 3}, []int{5, 6}, false},
		{"clone silent", []int{1, 2}, nil, false},
	} {
		src := &slot{idx: 0, name: "a", worker: 1, spec: target.NodeSpec{Layout: layout}}
		cl := &slot{idx: 1, name: "a-clone", worker: 1, spec: target.NodeSpec{Layout: layout}}
		r := &run{kind: verify.KindSnowflake, faults: []FaultResult{{Name: "clone", Confirmed: true}}}
		r.watchOverlap(0, src, cl)
		buf := newIDBuf(verify.KindSnowflake, 1)
		for _, c := range []struct {
			sl  *slot
			mss []int
		}{{src, tc.src}, {cl, tc.clone}} {
			for _, ms := range c.mss {
				buf.sf[0], buf.n = idAt(ms), 1
				r.observeOverlap(&view{sl: c.sl, up: true}, buf)
			}
		}
		r.endOverlap(cl.idx)
		r.settleOverlap()
		fr := r.faults[0]
		if fr.Confirmed != tc.confirmed {
			t.Errorf("%s: confirmed %v, want %v: %v", tc.name, fr.Confirmed, tc.confirmed, fr.Detail)
		}
		if !tc.confirmed && !strings.Contains(strings.Join(fr.Detail, " "), "never issued IDs in the same tick") {
			t.Errorf("%s: detail %v does not say why", tc.name, fr.Detail)
		}
		if r.noverlap.Load() != 0 {
			t.Errorf("%s: %d watches left open", tc.name, r.noverlap.Load())
		}
	}
}
