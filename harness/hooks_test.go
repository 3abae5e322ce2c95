package harness

import (
	"context"
	"errors"
	"testing"

	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/lease"
)

// TestStoreLinkDirections: a cut link never reaches the store; a deaf one
// (an inbound partition) reaches it, the call takes effect, and the
// answer is lost.
func TestStoreLinkDirections(t *testing.T) {
	ctx := context.Background()
	mem := lease.NewMemory(nil)
	link := &storeLink{Registry: mem}
	le, err := link.Acquire(ctx, lease.Request{Holder: "a", Range: lease.Range{Min: 1, Max: 1}, TTL: lease.DefaultTTL})
	if err != nil {
		t.Fatal(err)
	}
	link.cut.Store(true)
	if _, err := link.Renew(ctx, le, 100); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("renew through a cut link: %v", err)
	}
	if ls, _ := mem.List(ctx); len(ls) != 1 || ls[0].LastIssuedMs == 100 {
		t.Fatalf("a cut link's renewal reached the store: %+v", ls)
	}
	link.cut.Store(false)
	link.deaf.Store(true)
	if _, err := link.Renew(ctx, le, 200); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("renew through a deaf link: %v", err)
	}
	if ls, _ := mem.List(ctx); len(ls) != 1 || ls[0].LastIssuedMs != 200 {
		t.Fatalf("a deaf link's renewal did not take effect: %+v", ls)
	}
	if _, err := link.List(ctx); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("list through a deaf link: %v", err)
	}
	link.deaf.Store(false)
	if _, err := link.List(ctx); err != nil {
		t.Fatalf("list after the heal: %v", err)
	}
}

// TestJudgeCheck: a second judge passes only when it agrees exactly with
// the verifier, and one that could not judge is shown, not counted.
func TestJudgeCheck(t *testing.T) {
	f := Figures{IDs: 100, Duplicates: 3}
	for _, tc := range []struct {
		j    target.Judgement
		want Verdict
		info bool
	}{
		{target.Judgement{Name: "o", IDs: 100, Duplicates: 3}, Pass, false},
		{target.Judgement{Name: "o", IDs: 100, Duplicates: 2}, Fail, false},
		{target.Judgement{Name: "o", IDs: 99, Duplicates: 3}, Fail, false},
		{target.Judgement{Name: "o", Unknown: "no Postgres"}, Unknown, true},
	} {
		c := judgeCheck(tc.j, f)
		if c.Verdict != tc.want || c.Info != tc.info || c.Expr != "o agrees with the verifier" {
			t.Errorf("%+v: %+v", tc.j, c)
		}
	}
}

// TestWithClient: the client index travels in the context.
func TestWithClient(t *testing.T) {
	if _, ok := target.ClientOf(context.Background()); ok {
		t.Fatal("a bare context names a client")
	}
	if i, ok := target.ClientOf(target.WithClient(context.Background(), 3)); !ok || i != 3 {
		t.Fatalf("client %d %v", i, ok)
	}
}
