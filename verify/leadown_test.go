package verify

import (
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// TestMaxLeadOwn: after a 50 ms rewind a logical clock that keeps issuing
// at true time shows no lead over true time, but a 50 ms lead over its
// own clock; an issuer whose clock agrees shows neither.
func TestMaxLeadOwn(t *testing.T) {
	l := generator.DefaultLayout()
	v := New(Config{Layout: l})
	a := v.Issuer("a", 0, 1)
	b := v.Issuer("b", 0, 2)
	w := v.FaultWindow("rewind", l.Epoch.UnixNano()+int64(time.Second), l.Epoch.UnixNano()+int64(2*time.Second))
	_ = w
	at := func(ms int64) int64 { return l.Epoch.UnixNano() + ms*int64(time.Millisecond) }
	id := func(ms, node, seq int64) generator.ID {
		x, err := l.Compose(ms, node, seq)
		if err != nil {
			t.Fatal(err)
		}
		return x
	}
	// Before the rewind: both in step.
	v.Observe(Observation{Issuer: a, Stream: 1, RefStart: at(500), RefEnd: at(500), IDs: []generator.ID{id(500, 1, 0)}})
	v.Observe(Observation{Issuer: b, Stream: 2, RefStart: at(500), RefEnd: at(500), IDs: []generator.ID{id(500, 2, 0)}})
	// a's clock is 50 ms behind from 1 s on; it issues at true time.
	v.Observe(Observation{Issuer: a, Stream: 1, RefStart: at(1000), RefEnd: at(1000), IDs: []generator.ID{id(1000, 1, 0)}, OwnOffset: -50 * time.Millisecond})
	v.Observe(Observation{Issuer: b, Stream: 2, RefStart: at(1000), RefEnd: at(1000), IDs: []generator.ID{id(1000, 2, 0), id(1000, 2, 1)}})
	r := v.Result()
	if r.Lead.Max != 0 {
		t.Errorf("lead over true time %v, want 0", r.Lead.Max)
	}
	if r.MaxLeadOwn != 50*time.Millisecond {
		t.Errorf("MaxLeadOwn = %v, want 50ms", r.MaxLeadOwn)
	}
	if got := r.Issuers[0].MaxLeadOwn; got != 50*time.Millisecond {
		t.Errorf("a: MaxLeadOwn = %v, want 50ms", got)
	}
	if got := r.Issuers[1].MaxLeadOwn; got != 0 {
		t.Errorf("b: MaxLeadOwn = %v, want 0", got)
	}
	if len(r.Windows) != 1 || r.Windows[0].MaxLeadOwn != 50*time.Millisecond {
		t.Errorf("window: %+v", r.Windows)
	}
	// A clock ahead of true time: lead over true time, none over its own.
	v2 := New(Config{Layout: l})
	c := v2.Issuer("c", 0, 3)
	v2.Observe(Observation{Issuer: c, RefStart: at(1000), RefEnd: at(1000), IDs: []generator.ID{id(1030, 3, 0)}, OwnOffset: 30 * time.Millisecond})
	if r := v2.Result(); r.Lead.Max != 30*time.Millisecond || r.MaxLeadOwn != 0 {
		t.Errorf("clock ahead: lead %v, own %v; want 30ms, 0", r.Lead.Max, r.MaxLeadOwn)
	}
}
