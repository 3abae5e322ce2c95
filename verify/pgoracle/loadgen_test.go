package pgoracle

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/loadgen"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/server"
	"github.com/snowchaos/snowchaos/verify"
)

// TestOracleAgreesUnderLoad drives HTTP load at three nodes, two of them
// clones of one worker ID (real duplicates, not injected ones), feeding
// every response both to the live verifier and, through the Sink, to the
// Postgres oracle: Postgres must count exactly the duplicates the verifier
// counted.
func TestOracleAgreesUnderLoad(t *testing.T) {
	c := admin(t)
	schema := testSchema(t, c)
	var urls []string
	for _, worker := range []int64{1, 2, 2} {
		nd, err := node.New(context.Background(), node.Config{Settings: generator.Settings{Node: worker}})
		if err != nil {
			t.Fatal(err)
		}
		srv, _ := server.New(server.Config{Node: nd, Logger: slog.New(slog.DiscardHandler)})
		ts := httptest.NewServer(srv.Handler())
		t.Cleanup(func() { ts.Close(); nd.Stop(context.Background(), true) })
		urls = append(urls, ts.URL)
	}
	o, err := New(context.Background(), Config{Schema: schema, BatchSize: 5000})
	if err != nil {
		t.Fatal(err)
	}
	defer o.Close()
	v := verify.NewConcurrent(verify.Config{})
	var mu sync.Mutex
	var addErr error
	rep, err := loadgen.Run(context.Background(), loadgen.Config{
		Nodes: urls, Batch: 20, Workers: 6, MaxRequests: 3000, Duration: time.Minute, Verifier: v,
		Sink: func(r *loadgen.Response) {
			if err := o.Add(int16(r.Node), r.IDs); err != nil {
				mu.Lock()
				addErr = err
				mu.Unlock()
			}
		},
	})
	if err != nil || addErr != nil {
		t.Fatal(err, addErr)
	}
	res, err := o.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	vr := v.Result()
	t.Logf("load: %v", rep)
	t.Logf("verifier %d IDs, %d duplicates; postgres %d rows, %d duplicates (%v)", vr.IDs, vr.Duplicates, res.Rows, res.Duplicates, res.Verdict)
	if vr.Duplicates == 0 {
		t.Fatal("the cloned worker produced no duplicates: the test proves nothing")
	}
	if res.Verdict != VerdictFail || res.Duplicates != vr.Duplicates || res.Rows != vr.IDs || rep.Dropped != 0 {
		t.Fatalf("postgres %+v disagrees with the verifier (%d IDs, %d duplicates)", res, vr.IDs, vr.Duplicates)
	}
	for _, d := range res.Details {
		for _, s := range d.Sources {
			if s != 1 && s != 2 {
				t.Fatalf("duplicate %d from source %d, want only the clones 1 and 2", d.ID, s)
			}
		}
	}
}
