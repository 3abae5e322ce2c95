package generator

import (
	"errors"
	"testing"
	"time"
)

func TestSmoke(t *testing.T) {
	for _, p := range []Policy{PolicyWait, PolicyRefuse, PolicyLogical} {
		c := newScriptClock(DefaultEpoch.Add(time.Hour))
		g, err := New(Settings{Clock: c, Policy: p, Node: 3})
		if err != nil {
			t.Fatal(err)
		}
		var last ID = -1
		for i := 0; i < 20000; i++ {
			if i%3000 == 0 {
				c.Advance(time.Millisecond)
			}
			id, err := g.Next()
			if err != nil {
				t.Fatalf("%v: %d: %v", p, i, err)
			}
			if id <= last {
				t.Fatalf("%v: not increasing: %d after %d", p, id, last)
			}
			last = id
		}
		c.Step(-3 * time.Millisecond)
		id, err := g.Next()
		t.Logf("%v after rewind: %v %v stats %+v", p, id, err, g.Stats())
		if p == PolicyRefuse && !errors.Is(err, ErrClockBackwards) {
			t.Fatal(err)
		}
		if p != PolicyRefuse && (err != nil || id <= last) {
			t.Fatal(id, err)
		}
	}
}
