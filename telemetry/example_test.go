package telemetry_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry"
	"github.com/snowchaos/snowchaos/telemetry/tracing"
)

// A node serving one generator (snowchaos serve): tracing from OTEL_*,
// the collector on a served registry, the NodeMetrics as the generator's
// Observer, a span per request.
func Example_server() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tp, err := tracing.Setup(ctx, "snowchaos-node")
	if err != nil {
		log.Fatal(err)
	}
	defer tp.Shutdown(context.Background())

	reg := telemetry.NewRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{})
	reg.MustRegister(gc)
	obs := gc.MustNode("")
	g, err := generator.New(generator.Settings{Node: 7, Observer: obs})
	if err != nil {
		log.Fatal(err)
	}
	obs.Attach(g)
	addr, err := telemetry.Serve(ctx, "127.0.0.1:0", reg)
	if err != nil {
		log.Fatal(err)
	}
	_ = addr // scrape http://addr/metrics

	// Per request: one span, its context handed to the generator.
	rctx, span := tracing.StartBatch(ctx, "node7", 100)
	ids := make([]generator.ID, 100)
	_, err = g.NextNContext(rctx, ids)
	tracing.End(span, err)
	fmt.Println(err == nil, g.Stats().Issued)
	// Output: true 100
}

// Several in-process generators sharing one registry (the harness), each
// under a node label.
func Example_perNode() {
	reg := telemetry.NewRegistry()
	gc := telemetry.NewGeneratorCollector(telemetry.Options{PerNode: true})
	reg.MustRegister(gc)
	for i, name := range []string{"node1", "node2"} {
		obs := gc.MustNode(name)
		g, err := generator.New(generator.Settings{Node: int64(i + 1), Observer: obs})
		if err != nil {
			log.Fatal(err)
		}
		obs.Attach(g)
	}
	fmt.Println(gc.Nodes())
	// Output: [node1 node2]
}

// A lease keeper feeds its LeaseMetrics.
func ExampleLeaseMetrics() {
	lc := telemetry.NewLeaseCollector(telemetry.Options{})
	m := lc.MustNode("")
	m.SetState(telemetry.LeaseHeld)
	m.SetExpiry(time.Unix(1_800_000_010, 0))
	m.ObserveRenewal(telemetry.RenewalOK)
	m.ObserveHandoffWait(120 * time.Millisecond)
	fmt.Println(telemetry.LeaseStates())
	// Output: [held renewing lost released]
}
