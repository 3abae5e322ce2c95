package verify_test

import (
	"fmt"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/verify"
)

// A simulated run: a node whose clock steps back 150 ms (PolicyWait keeps
// it unique at the cost of waiting), and a clone started with the same
// worker ID (caught as duplicates, with both issuers).
func Example() {
	ref := faults.NewVirtual(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), true)
	stepped := faults.New(ref)
	node, _ := generator.New(generator.Settings{Node: 1, Clock: stepped})
	clone, _ := generator.New(generator.Settings{Node: 1, Clock: stepped}) // a copied VM

	v := verify.New(verify.Config{})
	a := v.Issuer("node-1", 0, 1)
	c := v.Issuer("node-1-clone", 0, 1)

	call := func(is verify.IssuerID, stream uint64, g *generator.Generator) {
		ids := make([]generator.ID, 10)
		start, mono0 := ref.Now()
		n, err := g.NextN(ids)
		end, mono1 := ref.Now()
		v.Observe(verify.Observation{Issuer: is, Stream: stream, RefStart: start, RefEnd: end,
			IDs: ids[:n], Outcome: verify.OutcomeOf(err), Wait: time.Duration(mono1 - mono0)})
	}
	for i := range 400 {
		if i == 100 {
			now, _ := ref.Now()
			v.FaultWindow("step-back", now, now+int64(time.Second))
			stepped.Step(-150 * time.Millisecond)
		}
		call(a, 1, node)
		if i >= 300 {
			call(c, 2, clone)
		}
		ref.Advance(time.Millisecond)
	}
	r := v.Result()
	fmt.Println("duplicates:", r.Duplicates > 0, r.DuplicatePairs[0].First, "then", r.DuplicatePairs[0].Second)
	fmt.Println("node-1 repeated itself:", r.Issuers[0].Duplicates)
	fmt.Println("node-1 waited out the step:", r.Issuers[0].MaxWait >= 100*time.Millisecond)
	fmt.Println("order violations:", r.OrderViolations, "restart violations:", r.RestartViolations)
	fmt.Println("first duplicate in window:", r.DuplicateDetails[0].Windows)
	// Output:
	// duplicates: true node-1#0 then node-1-clone#0
	// node-1 repeated itself: 0
	// node-1 waited out the step: true
	// order violations: 0 restart violations: 0
	// first duplicate in window: [step-back]
}
