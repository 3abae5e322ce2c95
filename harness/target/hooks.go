package target

import "context"

// clientKey is the context key of the load client a call comes from.
type clientKey struct{}

// WithClient returns ctx marked as carrying a call of the run's load
// client i (0-based, unique within the run). Node.Issue may read it (see
// ClientOf) to send each client's calls its own way, as the netns
// targets send them from the client's own network namespace.
func WithClient(ctx context.Context, i int) context.Context {
	return context.WithValue(ctx, clientKey{}, i)
}

// ClientOf returns the load client WithClient marked ctx with; ok is
// false for a call from no client (the harness's own).
func ClientOf(ctx context.Context) (i int, ok bool) {
	i, ok = ctx.Value(clientKey{}).(int)
	return i, ok
}

// StoreFaulter is implemented by targets that run the lease store their
// nodes lease from (the netns targets: a real store in a namespace of its
// own): the harness cuts that store off for a store_outage fault, instead
// of its own in-memory one.
type StoreFaulter interface {
	// CutStore makes the run's lease store unreachable: for every node
	// when hosts is empty (the store is down), else for those hosts only
	// (a partition), in direction dir ("both", "outbound": what the hosts
	// send is lost, "inbound": what the store sends them is lost). It
	// returns how it was done, for the fault's report.
	CutStore(ctx context.Context, run string, hosts []string, dir string) (string, error)
	// HealStore undoes CutStore for the same hosts.
	HealStore(ctx context.Context, run string, hosts []string) (string, error)
}

// Judge is implemented by targets that keep a second, independent record
// of every ID their nodes returned to the load clients (the netns
// targets: the Postgres oracle, which stores each ID with the client that
// received it). The harness asks it once the run's nodes are closed and
// checks that it agrees with its own verifier.
type Judge interface {
	// Judge returns the record's verdict on run (Env.Run).
	Judge(ctx context.Context, run string) Judgement
}

// Judgement is a Judge's verdict on a run.
type Judgement struct {
	// Name names the judge in the report ("postgres oracle").
	Name string
	// Unknown, when set, says why the judge could not judge; the other
	// fields are then meaningless.
	Unknown string
	// IDs counts the IDs it recorded; Duplicates the repeats among them
	// (an ID seen k times is k-1), as the verifier counts them.
	IDs, Duplicates uint64
	// Detail describes the first duplicates and which clients received
	// them.
	Detail string
}
