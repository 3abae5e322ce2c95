// Package lease hands out worker IDs as leases, so that no two live nodes
// ever issue Snowflake IDs with the same worker ID.
//
// A Registry grants, renews and releases leases on a range of worker IDs;
// the memory backend lives here, lease/postgres, lease/etcd and
// lease/zookeeper hold the others, and lease/leasetest is the conformance
// suite all of them pass. A Keeper holds one lease for a node, renews it,
// and is the generator's Fence and Checkpointer: the generator issues only
// while the Keeper holds an unexpired lease by its own monotonic clock, and
// a new holder starts only after the previous holder's mark (the handoff
// guard), which the Keeper records in the store before the generator
// issues past it. Holders report their clocks through the store, and
// before its first ID a Keeper compares its clock with the median of its
// live peers' and refuses to start when it is too far off (the peer clock
// check, peerclock.go; docs/leases.md).
//
// Time in this package comes only through generator.Clock; functions of
// time take the time they are given (Lease.ExpiredAt).
package lease

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Registry grants leases on worker IDs. Implementations are safe for
// concurrent use by many goroutines and many processes (the store decides),
// and every method honours ctx's deadline.
//
// Guarantees every backend gives (checked by lease/leasetest):
//   - at any store time at most one unexpired lease exists per worker ID;
//   - a lease's Token is strictly greater than every earlier lease's Token
//     on the same worker ID;
//   - expiry is decided by the store's clock (LeasedUntil is store time);
//   - LastIssuedMs never decreases; it survives release and expiry and
//     is handed to the next holder of the worker ID;
//   - a write by a lease that is no longer held (Renew, Record, Release)
//     changes nothing;
//   - each acquisition and renewal records the holder's clock report
//     (Request.ClockMs, the ReportedMs of the lease passed to Renew) with
//     the store's time of receipt, and List tells each held lease's
//     report and its age by the store's clock (Lease.ReportedMs,
//     ReportAge), so a reader can estimate every live holder's clock
//     without trusting its own (see Lease.EstimatedClock).
type Registry interface {
	// Acquire grants a lease on one worker ID in req.Range, in this order
	// of preference: the worker ID this holder held last if it is free (or
	// expired), the free ones in req.Prefer, a never-used worker ID, then the longest
	// expired one. A worker ID the same holder still holds unexpired (a
	// crashed incarnation or a clone with the same identity) is never taken
	// over: another one is granted. When every worker ID in the range is
	// held it fails with an *AllTakenError (ErrAllTaken).
	Acquire(ctx context.Context, req Request) (Lease, error)
	// Renew extends l by its TTL from the store's now and records
	// lastIssuedMs (kept as the maximum of the stored and given values)
	// and l.ReportedMs, the holder's clock when it sent the renewal, as
	// the lease's report (received now, by the store's clock). It fails
	// with ErrLost when l has expired, was released, or another holder has
	// the worker ID; the returned Lease has the new LeasedUntil. A
	// negative ReportedMs counts as none.
	Renew(ctx context.Context, l Lease, lastIssuedMs int64) (Lease, error)
	// Record stores lastIssuedMs for l's worker ID, kept as the maximum of the
	// stored and given values, while l is still held, without extending it. It
	// fails with ErrLost when l has expired, was released, or another holder has
	// the worker ID (nothing is written), and with ErrUnavailable when the store
	// cannot be reached or did not answer in time.
	Record(ctx context.Context, l Lease, lastIssuedMs int64) error
	// Release ends l at once, recording lastIssuedMs for the next holder.
	// It fails with ErrLost when l was no longer held (nothing is written).
	Release(ctx context.Context, l Lease, lastIssuedMs int64) error
	// List returns every worker ID the store knows, held or not, ordered
	// by worker ID. Entries that are released or expired have a
	// LeasedUntil at or before the store's now (zero when unknown) and no
	// report (ReportedMs 0); held ones carry their holder's last report
	// and its age at the store's now during the call.
	List(ctx context.Context) ([]Lease, error)
}

// Request asks a Registry for a lease.
type Request struct {
	// Holder is the stable identity of the node (see DefaultHolder). A
	// restarting node with the same Holder gets its worker ID back.
	Holder string
	// Range is the set of worker IDs to choose from (see NodeRange).
	Range Range
	// TTL is how long the lease lasts without renewal, in store time.
	// Backends may round it up (etcd grants whole seconds, at least its
	// minimum TTL); they never shorten it.
	TTL time.Duration
	// Prefer lists worker IDs to try, in order, after the holder's own
	// previous one. IDs outside Range or held are skipped; nil: none.
	Prefer []int64
	// ClockMs is the holder's wall clock, Unix ms by its own clock, when
	// it sent the request: the granted lease's first clock report (see
	// Lease.ReportedMs); 0: no report.
	ClockMs int64
}

// Validate reports a field out of range, wrapping ErrInvalidRequest.
func (r Request) Validate() error {
	switch {
	case r.Holder == "":
		return fmt.Errorf("%w: empty holder", ErrInvalidRequest)
	case len(r.Holder) > MaxHolderLen:
		return fmt.Errorf("%w: holder longer than %d bytes", ErrInvalidRequest, MaxHolderLen)
	case r.TTL < time.Millisecond:
		return fmt.Errorf("%w: ttl %v below 1ms", ErrInvalidRequest, r.TTL)
	case r.ClockMs < 0:
		return fmt.Errorf("%w: clock report %d ms before 1970", ErrInvalidRequest, r.ClockMs)
	}
	return r.Range.Validate()
}

// MaxHolderLen is the longest holder identity a Registry accepts.
const MaxHolderLen = 253

// MaxWorkerID is the largest worker ID any backend stores (the node field
// of the widest preset layout is 16 bits).
const MaxWorkerID = 1<<16 - 1

// Range is an inclusive range of worker IDs.
type Range struct {
	Min, Max int64
}

// NodeRange is the whole node field of a layout with nodeBits bits:
// [0, 2^nodeBits-1].
func NodeRange(nodeBits uint) Range {
	if nodeBits > 16 {
		nodeBits = 16
	}
	return Range{Min: 0, Max: 1<<nodeBits - 1}
}

// Len is the number of worker IDs in r (0 when r is invalid).
func (r Range) Len() int64 {
	if r.Max < r.Min {
		return 0
	}
	return r.Max - r.Min + 1
}

// Contains reports whether id lies in r.
func (r Range) Contains(id int64) bool { return id >= r.Min && id <= r.Max }

// String returns "[min,max]".
func (r Range) String() string { return fmt.Sprintf("[%d,%d]", r.Min, r.Max) }

// Validate checks 0 <= Min <= Max <= MaxWorkerID, wrapping ErrInvalidRequest.
func (r Range) Validate() error {
	if r.Min < 0 || r.Max < r.Min || r.Max > MaxWorkerID {
		return fmt.Errorf("%w: worker range %v (want 0 <= min <= max <= %d)", ErrInvalidRequest, r, MaxWorkerID)
	}
	return nil
}

// Lease is a granted (or, from List, a recorded) lease on one worker ID.
type Lease struct {
	// WorkerID is the leased worker (node) ID.
	WorkerID int64 `json:"worker_id"`
	// Holder is the identity that holds or last held it.
	Holder string `json:"holder"`
	// Token is a fencing token, strictly increasing per worker ID across
	// grants (renewals keep it).
	Token int64 `json:"token"`
	// LeasedUntil is when the lease expires, in store time (for etcd, an
	// estimate: the client's clock when asked plus the remaining TTL).
	LeasedUntil time.Time `json:"leased_until"`
	// TTL is the duration the lease was granted with (as the store
	// rounded it); each renewal extends it by TTL from the store's now.
	TTL time.Duration `json:"ttl"`
	// LastIssuedMs is an upper bound, in Unix ms by the holder's clock, of
	// the time of every ID issued under this worker ID so far, as last
	// recorded; 0 when none was ever recorded.
	LastIssuedMs int64 `json:"last_issued_ms"`
	// ReportedMs is the holder's clock report: its wall clock, Unix ms by
	// its own clock, when it sent its acquisition (Request.ClockMs) or its
	// last renewal (this field of the lease it passed to Renew, which
	// records it). 0: none, or (from List) the lease is no longer held.
	ReportedMs int64 `json:"reported_ms,omitempty"`
	// ReportAge is, from List, how long before the store's now during the
	// call the store received that report, by the store's clock; zero
	// without a report.
	ReportAge time.Duration `json:"report_age,omitempty"`
	// ReportAgeError bounds ReportAge's error: how finely the backend
	// reads the store's clock (memory and Postgres exactly, ZooKeeper to
	// the millisecond, etcd to half a second: its lease TTLs are whole
	// seconds).
	ReportAgeError time.Duration `json:"report_age_error,omitempty"`
}

// ExpiredAt reports whether l has expired at store time now.
func (l Lease) ExpiredAt(now time.Time) bool { return !now.Before(l.LeasedUntil) }

// EstimatedClock estimates, from a List entry, the holder's wall clock at the
// store's now during that List call: ReportedMs plus ReportAge, the
// holder's clock carried forward at the store's rate. It is off by the
// ReportAgeError, the delay between the holder's reading and the
// store's receipt of it (at most the call that carried it: one write for
// a renewal, several round trips for an acquisition; see
// PeerCheck.Fresh), and the rate difference of the two clocks over
// ReportAge; false without a report.
func (l Lease) EstimatedClock() (time.Time, bool) {
	if l.ReportedMs <= 0 {
		return time.Time{}, false
	}
	return time.UnixMilli(l.ReportedMs).Add(l.ReportAge), true
}

// String returns e.g. "worker 3 held by node-a (token 7) until 2025-01-01T00:00:10Z".
func (l Lease) String() string {
	return fmt.Sprintf("worker %d held by %s (token %d) until %s", l.WorkerID, l.Holder, l.Token, l.LeasedUntil.UTC().Format(time.RFC3339Nano))
}

// Exported sentinel errors. Callers branch on them with errors.Is; their
// text never changes once published.
var (
	// ErrAllTaken: every worker ID in the requested range is held. The
	// error is an *AllTakenError naming the range and the holders.
	ErrAllTaken = errors.New("lease: all worker IDs taken")
	// ErrLost: the lease expired, was released, or another holder took the
	// worker ID; the node must stop issuing with it.
	ErrLost = errors.New("lease: lease lost")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time; the outcome of the call is unknown.
	ErrUnavailable = errors.New("lease: store unavailable")
	// ErrInvalidRequest: a Request or Range field is out of range.
	ErrInvalidRequest = errors.New("lease: invalid request")
	// ErrInvalidConfig: a KeeperConfig or backend option is out of range.
	ErrInvalidConfig = errors.New("lease: invalid config")
	// ErrReleased: the Keeper released its lease (graceful shutdown).
	ErrReleased = errors.New("lease: released")
)

// AllTakenError reports that every worker ID in Range is held. It wraps
// ErrAllTaken.
type AllTakenError struct {
	// Range is the requested range.
	Range Range
	// Holders are the unexpired leases in Range, ordered by worker ID.
	Holders []Lease
}

// maxNamed bounds how many holders an AllTakenError names in its text.
const maxNamed = 16

// Error returns e.g. "lease: all worker IDs taken: range [0,1] held by 0=node-a 1=node-b".
func (e *AllTakenError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%v: range %v held by", ErrAllTaken, e.Range)
	for i, h := range e.Holders {
		if i == maxNamed {
			fmt.Fprintf(&b, " (and %d more)", len(e.Holders)-maxNamed)
			break
		}
		fmt.Fprintf(&b, " %d=%s", h.WorkerID, h.Holder)
	}
	return b.String()
}

// Unwrap returns ErrAllTaken.
func (e *AllTakenError) Unwrap() error { return ErrAllTaken }

// DefaultHolder is the node's stable identity: $POD_NAME, else $HOSTNAME,
// else os.Hostname, else "snowchaos".
func DefaultHolder() string {
	for _, env := range []string{"POD_NAME", "HOSTNAME"} {
		if v := strings.TrimSpace(os.Getenv(env)); v != "" {
			return v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "snowchaos"
}

// Unavailable wraps a store error as ErrUnavailable (keeping err in the
// chain). Backends use it for every error that is not an outcome.
func Unavailable(err error) error {
	if err == nil || errors.Is(err, ErrUnavailable) {
		return err
	}
	return fmt.Errorf("%w: %w", ErrUnavailable, err)
}
