package explore

import (
	"context"
	"fmt"
	"testing"
	"time"
)

func TestTry(t *testing.T) {
	for i := range 3 {
		s := Generate(Derive(1, i), Space{}, mustCaps(t, "inprocess"), "inprocess", fmt.Sprint("x", i))
		fmt.Println(s.YAML())
		if _, err := s.Scenario("x.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	t0 := time.Now()
	rep, err := Run(context.Background(), Options{Seed: 1, Schedules: 100, Targets: []string{"inprocess", "bad-no-rewind-check"}, Shrink: 2})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("%+v %v\n", *rep, time.Since(t0))
	for _, f := range rep.Finds {
		fmt.Println(f.Index, f.Target, f.Failed, f.ShrinkRuns)
		if f.Shrunk != nil {
			fmt.Println(f.Original.YAML())
			fmt.Println(f.Shrunk.YAML())
		}
	}
}

func mustCaps(t *testing.T, n string) Caps {
	c, err := CapsOf(n)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
