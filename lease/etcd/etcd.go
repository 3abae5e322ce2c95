// Package etcd is a lease.Registry on etcd v3. Each worker ID has a key,
// created in a transaction only if absent and attached to an etcd lease
// with the TTL, so the store deletes it on expiry; the lease's token is the
// key's create revision. Beside it a mark key, not attached to any lease,
// keeps the last holder and last_issued_ms across release and expiry.
//
// Keys under Options.Prefix (default "/snowchaos/leases/"):
//
//	w/00042  {"holder":"node-a","clock_ms":...}                   lease-attached, live while held
//	m/00042  {"holder":"node-a","token":17,"last_issued_ms":...}  persistent
//
// # Clock reports
//
// The holder's clock report (clock_ms) lives in the worker key, written
// at the claim and with every renewal, right after the renewal's
// KeepAliveOnce. etcd keeps no wall time in its data model (revisions
// count writes, not time); its one clock is the leader's countdown of
// each lease, which a keep-alive restarts at the full TTL. So List takes a
// report's age from its lease: the granted TTL less the remaining one.
// TimeToLive answers whole seconds, truncated: List reports the middle of
// the possible ages, granted - remaining - 0.5s, with a ReportAgeError of
// half a second.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
)

var _ lease.Registry = (*Registry)(nil)

// DefaultPrefix is the key prefix when Options.Prefix is empty.
const DefaultPrefix = "/snowchaos/leases/"

// Options configure a Registry. The zero value is the default.
type Options struct {
	// Prefix is the key prefix; zero: DefaultPrefix. Use one per cluster
	// of nodes (tests use one each).
	Prefix string
	// Clock estimates LeasedUntil (the client's wall clock plus the TTL
	// etcd reports); nil: generator.SystemClock(). Expiry itself is etcd's.
	Clock generator.Clock
	// DialTimeout bounds connecting in Open; zero: 5s.
	DialTimeout time.Duration
}

// Registry is a lease.Registry on etcd. It is safe for concurrent use.
type Registry struct {
	cli       *clientv3.Client
	ownClient bool
	prefix    string
	clock     generator.Clock
}

// New returns a Registry using cli; the caller keeps ownership of cli.
func New(cli *clientv3.Client, opts Options) *Registry {
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !strings.HasSuffix(opts.Prefix, "/") {
		opts.Prefix += "/"
	}
	if opts.Clock == nil {
		opts.Clock = generator.SystemClock()
	}
	return &Registry{cli: cli, prefix: opts.Prefix, clock: opts.Clock}
}

func init() {
	lease.RegisterScheme(Scheme, func(_ context.Context, u string, o lease.OpenOptions) (lease.Registry, func() error, error) {
		endpoints, prefix, err := ParseURL(u)
		if err != nil {
			return nil, nil, err
		}
		r, err := Open(endpoints, Options{Prefix: prefix, Clock: o.Clock})
		if err != nil {
			return nil, nil, err
		}
		return r, r.Close, nil
	})
}

// Scheme is the URL scheme of an etcd lease store.
const Scheme = "etcd"

// maxEndpoints bounds the servers a URL may name.
const maxEndpoints = 64

// urlForm is the form of an etcd store's URL.
var urlForm = lease.HostsURL{Scheme: Scheme, Name: "etcd", Form: "etcd://host:port[,host:port][/prefix/]", MaxHosts: maxEndpoints}

// ParseURL reads etcd://host:port[,host:port...][/prefix/] (the scheme in
// any case) into client endpoints ("http://host:port") and the key prefix
// ("" without one: DefaultPrefix). A bad URL fails with
// lease.ErrInvalidConfig naming the part at fault.
func ParseURL(s string) (endpoints []string, prefix string, err error) {
	hosts, path, err := urlForm.Parse(s)
	if err != nil {
		return nil, "", err
	}
	for _, h := range hosts {
		endpoints = append(endpoints, "http://"+h)
	}
	if path != "" {
		prefix = "/" + path
	}
	return endpoints, prefix, nil
}

// Open connects to endpoints ("host:port" or URLs) and returns a Registry
// owning the client. Close it.
func Open(endpoints []string, opts Options) (*Registry, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("%w: no etcd endpoints", lease.ErrInvalidConfig)
	}
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 5 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: opts.DialTimeout})
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	r := New(cli, opts)
	r.ownClient = true
	return r, nil
}

// Close closes the client if Open created it.
func (r *Registry) Close() error {
	if r.ownClient {
		return r.cli.Close()
	}
	return nil
}

// Client returns the etcd client.
func (r *Registry) Client() *clientv3.Client { return r.cli }

func (r *Registry) workerKey(id int64) string { return fmt.Sprintf("%sw/%05d", r.prefix, id) }
func (r *Registry) markKey(id int64) string   { return fmt.Sprintf("%sm/%05d", r.prefix, id) }

type workerVal struct {
	Holder  string `json:"holder"`
	ClockMs int64  `json:"clock_ms,omitempty"`
}

// ageError is the error of a report's age: TimeToLive's whole seconds,
// truncated, read at their middle.
const ageError = time.Second / 2

type markVal struct {
	Holder       string `json:"holder"`
	Token        int64  `json:"token"`
	LastIssuedMs int64  `json:"last_issued_ms"`
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints always marshal
	}
	return string(b)
}

// slot is one worker ID's state in a snapshot.
type slot struct {
	live   *mvccpb.KeyValue
	holder string    // from the live key
	worker workerVal // the live key's value
	mark   markVal
	markKV *mvccpb.KeyValue
}

// snapshot reads every key under the prefix at one revision.
func (r *Registry) snapshot(ctx context.Context) (map[int64]*slot, error) {
	resp, err := r.cli.Get(ctx, r.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	slots := map[int64]*slot{}
	get := func(id int64) *slot {
		s := slots[id]
		if s == nil {
			s = &slot{}
			slots[id] = s
		}
		return s
	}
	for _, kv := range resp.Kvs {
		rest := strings.TrimPrefix(string(kv.Key), r.prefix)
		kind, num, ok := strings.Cut(rest, "/")
		if !ok {
			continue
		}
		id, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			continue
		}
		switch kind {
		case "w":
			var v workerVal
			if json.Unmarshal(kv.Value, &v) != nil {
				continue
			}
			s := get(id)
			s.live, s.holder, s.worker = kv, v.Holder, v
		case "m":
			var v markVal
			if json.Unmarshal(kv.Value, &v) != nil {
				continue
			}
			s := get(id)
			s.mark, s.markKV = v, kv
		}
	}
	return slots, nil
}

// Acquire implements lease.Registry: it grants an etcd lease with the TTL
// (rounded up to whole seconds, and at least etcd's minimum), then creates
// the chosen worker key in a transaction that succeeds only if the key is
// absent and the mark unchanged since it was read; on a lost race it reads
// again and retries.
func (r *Registry) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := req.Validate(); err != nil {
		return lease.Lease{}, err
	}
	secs := int64((req.TTL + time.Second - 1) / time.Second)
	wall, _ := r.clock.Now()
	g, err := r.cli.Grant(ctx, secs)
	if err != nil {
		return lease.Lease{}, lease.Unavailable(err)
	}
	granted := false
	defer func() {
		if !granted {
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			r.cli.Revoke(rctx, g.ID) //nolint:errcheck // best effort: the lease expires anyway
			cancel()
		}
	}()
	for attempt := 0; attempt < int(req.Range.Len())+64; attempt++ {
		slots, err := r.snapshot(ctx)
		if err != nil {
			return lease.Lease{}, err
		}
		pick, held := choose(slots, req)
		if pick < 0 {
			return lease.Lease{}, &lease.AllTakenError{Range: req.Range, Holders: held}
		}
		s := slots[pick]
		var prev markVal
		markRev := int64(0)
		if s != nil && s.markKV != nil {
			prev, markRev = s.mark, s.markKV.ModRevision
		}
		wk, mk := r.workerKey(pick), r.markKey(pick)
		resp, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(wk), "=", 0),
			clientv3.Compare(clientv3.ModRevision(mk), "=", markRev),
		).Then(
			clientv3.OpPut(wk, mustJSON(workerVal{Holder: req.Holder, ClockMs: req.ClockMs}), clientv3.WithLease(g.ID)),
			clientv3.OpPut(mk, mustJSON(markVal{Holder: req.Holder, Token: prev.Token, LastIssuedMs: prev.LastIssuedMs})),
		).Commit()
		if err != nil {
			return lease.Lease{}, lease.Unavailable(err)
		}
		if !resp.Succeeded {
			continue // a concurrent acquirer won this worker ID
		}
		granted = true
		return lease.Lease{
			WorkerID:     pick,
			Holder:       req.Holder,
			Token:        resp.Header.Revision,
			LeasedUntil:  time.Unix(0, wall).Add(time.Duration(g.TTL) * time.Second),
			TTL:          time.Duration(g.TTL) * time.Second,
			LastIssuedMs: prev.LastIssuedMs,
			ReportedMs:   req.ClockMs,
		}, nil
	}
	return lease.Lease{}, fmt.Errorf("%w: lease/etcd: too many lost races for range %v", lease.ErrUnavailable, req.Range)
}

// choose picks a worker ID as lease.Registry.Acquire documents (-1: none)
// and lists the live leases in the range. The most recent own mark wins
// among the holder's; the oldest mark (smallest mod revision) is the
// longest expired.
func choose(slots map[int64]*slot, req lease.Request) (int64, []lease.Lease) {
	var held []lease.Lease
	for id := req.Range.Min; id <= req.Range.Max; id++ {
		if s := slots[id]; s != nil && s.live != nil {
			held = append(held, lease.Lease{WorkerID: id, Holder: s.holder, Token: s.live.CreateRevision, LastIssuedMs: s.mark.LastIssuedMs})
		}
	}
	pick := req.Pick(func(id int64) lease.Slot {
		s := slots[id]
		if s == nil {
			return lease.Slot{}
		}
		out := lease.Slot{Live: s.live != nil, Used: s.markKV != nil, Holder: s.mark.Holder}
		if s.markKV != nil {
			out.Seq = s.markKV.ModRevision
		}
		return out
	})
	return pick, held
}

// current reads l's worker and mark keys and checks that l is still the
// live lease, returning the worker key, the stored mark and the mark key's
// mod revision (0 when absent).
func (r *Registry) current(ctx context.Context, l lease.Lease) (*mvccpb.KeyValue, markVal, int64, error) {
	wk, mk := r.workerKey(l.WorkerID), r.markKey(l.WorkerID)
	resp, err := r.cli.Txn(ctx).Then(clientv3.OpGet(wk), clientv3.OpGet(mk)).Commit()
	if err != nil {
		return nil, markVal{}, 0, lease.Unavailable(err)
	}
	lost := fmt.Errorf("%w: worker %d token %d", lease.ErrLost, l.WorkerID, l.Token)
	wkvs := resp.Responses[0].GetResponseRange().Kvs
	if len(wkvs) == 0 || wkvs[0].CreateRevision != l.Token {
		return nil, markVal{}, 0, lost
	}
	var wv workerVal
	if json.Unmarshal(wkvs[0].Value, &wv) != nil || wv.Holder != l.Holder {
		return nil, markVal{}, 0, lost
	}
	var mv markVal
	var rev int64
	if mkvs := resp.Responses[1].GetResponseRange().Kvs; len(mkvs) > 0 {
		json.Unmarshal(mkvs[0].Value, &mv) //nolint:errcheck // a damaged mark reads as zero
		rev = mkvs[0].ModRevision
	}
	return wkvs[0], mv, rev, nil
}

// maxMarkRaces bounds how often raiseMark reads again after a concurrent
// write of the same mark key (by this holder's own Renew and Record; each
// lost race means another write succeeded).
const maxMarkRaces = 64

// raiseMark stores max(stored, last) as the mark, and deletes the worker
// key when release, in one transaction that succeeds only while l is the
// live lease and the mark key is unchanged since it was read (so a
// concurrent write never lowers it); on a lost race it reads again. A mark
// l already wrote at or above last is not written again (l was seen live).
// It returns the mark now stored and the worker key as read.
func (r *Registry) raiseMark(ctx context.Context, l lease.Lease, last int64, release bool) (int64, *mvccpb.KeyValue, error) {
	wk, mk := r.workerKey(l.WorkerID), r.markKey(l.WorkerID)
	for range maxMarkRaces {
		kv, mv, rev, err := r.current(ctx, l)
		if err != nil {
			return 0, nil, err
		}
		if mv.LastIssuedMs >= last && mv.Token == l.Token && mv.Holder == l.Holder && !release {
			return mv.LastIssuedMs, kv, nil
		}
		v := max(mv.LastIssuedMs, last)
		ops := []clientv3.Op{clientv3.OpPut(mk, mustJSON(markVal{Holder: l.Holder, Token: l.Token, LastIssuedMs: v}))}
		if release {
			ops = append(ops, clientv3.OpDelete(wk))
		}
		resp, err := r.cli.Txn(ctx).If(
			clientv3.Compare(clientv3.CreateRevision(wk), "=", l.Token),
			clientv3.Compare(clientv3.ModRevision(mk), "=", rev),
		).Then(ops...).Commit()
		if err != nil {
			return 0, nil, lease.Unavailable(err)
		}
		if resp.Succeeded {
			return v, kv, nil
		}
	}
	return 0, nil, fmt.Errorf("%w: lease/etcd: worker %d: the mark kept changing under %d writes", lease.ErrUnavailable, l.WorkerID, maxMarkRaces)
}

// Renew implements lease.Registry with one KeepAliveOnce on the etcd
// lease, a conditional write of the clock report into the worker key and
// one of the mark.
func (r *Registry) Renew(ctx context.Context, l lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	kv, _, _, err := r.current(ctx, l)
	if err != nil {
		return lease.Lease{}, err
	}
	wall, _ := r.clock.Now()
	ka, err := r.cli.KeepAliveOnce(ctx, clientv3.LeaseID(kv.Lease))
	if errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return lease.Lease{}, fmt.Errorf("%w: worker %d token %d: etcd lease expired", lease.ErrLost, l.WorkerID, l.Token)
	}
	if err != nil {
		return lease.Lease{}, lease.Unavailable(err)
	}
	l.ReportedMs = max(l.ReportedMs, 0)
	wk := r.workerKey(l.WorkerID)
	resp, err := r.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(wk), "=", l.Token)).
		Then(clientv3.OpPut(wk, mustJSON(workerVal{Holder: l.Holder, ClockMs: l.ReportedMs}), clientv3.WithLease(clientv3.LeaseID(kv.Lease)))).
		Commit()
	switch {
	case err != nil:
		return lease.Lease{}, lease.Unavailable(err)
	case !resp.Succeeded:
		return lease.Lease{}, fmt.Errorf("%w: worker %d token %d", lease.ErrLost, l.WorkerID, l.Token)
	}
	last, _, err := r.raiseMark(ctx, l, lastIssuedMs, false)
	if err != nil {
		return lease.Lease{}, err
	}
	l.LeasedUntil = time.Unix(0, wall).Add(time.Duration(ka.TTL) * time.Second)
	l.TTL = time.Duration(ka.TTL) * time.Second
	l.LastIssuedMs = last
	return l, nil
}

// Record implements lease.Registry: a conditional write of the mark (the
// etcd lease is not kept alive).
func (r *Registry) Record(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	_, _, err := r.raiseMark(ctx, l, lastIssuedMs, false)
	return err
}

// Release implements lease.Registry: the mark is written and the worker
// key deleted in one transaction; then the etcd lease is revoked.
func (r *Registry) Release(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	_, kv, err := r.raiseMark(ctx, l, lastIssuedMs, true)
	if err != nil {
		return err
	}
	if _, err := r.cli.Revoke(ctx, clientv3.LeaseID(kv.Lease)); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return lease.Unavailable(err)
	}
	return nil
}

// List implements lease.Registry. Live entries cost one TimeToLive call
// each (LeasedUntil is the client's clock plus the remaining TTL, the
// report's age the granted TTL less the remaining one, see the package
// documentation); released or expired entries have a zero LeasedUntil.
func (r *Registry) List(ctx context.Context) ([]lease.Lease, error) {
	slots, err := r.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]lease.Lease, 0, len(slots))
	for id, s := range slots {
		l := lease.Lease{WorkerID: id, Holder: s.mark.Holder, Token: s.mark.Token, LastIssuedMs: s.mark.LastIssuedMs}
		if s.live != nil {
			l.Holder, l.Token = s.holder, s.live.CreateRevision
			wall, _ := r.clock.Now()
			ttl, err := r.cli.TimeToLive(ctx, clientv3.LeaseID(s.live.Lease))
			if err != nil {
				return nil, lease.Unavailable(err)
			}
			if ttl.TTL > 0 {
				l.LeasedUntil = time.Unix(0, wall).Add(time.Duration(ttl.TTL) * time.Second)
				l.TTL = time.Duration(ttl.GrantedTTL) * time.Second
				if v := s.worker; v.ClockMs > 0 {
					l.ReportedMs = v.ClockMs
					l.ReportAge = max(time.Duration(ttl.GrantedTTL-ttl.TTL)*time.Second-ageError, 0)
					l.ReportAgeError = ageError
				}
			}
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b lease.Lease) int { return int(a.WorkerID - b.WorkerID) })
	return out, nil
}
