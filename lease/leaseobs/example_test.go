package leaseobs_test

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leaseobs"
	"github.com/snowchaos/snowchaos/lease/leasetest"
	"github.com/snowchaos/snowchaos/telemetry"
)

// A node wires its Keeper through an Observer: the Registry and OnChange
// through NewKeeper, the generator's Checkpointer through Checkpointer.
func Example() {
	clock := leasetest.NewClock(epoch)
	store := lease.NewMemory(clock)

	reg := prometheus.NewRegistry()
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	reg.MustRegister(lc)
	obs := leaseobs.New(lc.MustNode(""), "")

	k, err := obs.NewKeeper(lease.KeeperConfig{
		Registry: store, Holder: "node-a", TTL: ttl, Clock: clock,
		OnChange: func(ev lease.Event) { fmt.Println("lease", ev.State) },
	})
	if err != nil {
		panic(err)
	}
	l, err := k.Acquire(context.Background())
	if err != nil {
		panic(err)
	}
	g, err := generator.New(generator.Settings{Node: l.WorkerID, Clock: k.Clock(), Fence: k, Checkpoint: obs.Checkpointer(k)})
	if err != nil {
		panic(err)
	}
	defer g.Close()
	// Then keep the lease: go k.Run(ctx), or k.Tick on a simulated clock.
	fmt.Println("worker", l.WorkerID)
	// Output:
	// lease held
	// worker 0
}
