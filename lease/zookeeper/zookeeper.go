package zookeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/zookeeper/zkurl"
)

var _ lease.Registry = (*Registry)(nil)

// controlTimeout is the session timeout of the Registry's own session, the
// one it reads through (it holds no lease).
const controlTimeout = 30 * time.Second

// maxTTL is the longest session timeout the protocol can carry (int32 ms).
const maxTTL = time.Duration(math.MaxInt32) * time.Millisecond

// fetchers bounds the reads a snapshot keeps in flight at once.
const fetchers = 32

// Options configure a Registry. The zero value is the default.
type Options struct {
	// Root is the path under which the znodes live; zero:
	// zkurl.DefaultRoot.
	// Use one per cluster of nodes (tests use one each).
	Root string
	// Clock times each lease's renewal deadline (its monotonic reading)
	// while the session is connected; nil: generator.SystemClock().
	// Expiry itself, and LeasedUntil, are the server's.
	Clock generator.Clock
	// Logger receives go-zookeeper's connection messages; nil: discarded.
	Logger zk.Logger
}

// Registry is a lease.Registry on ZooKeeper. It is safe for concurrent
// use. Each lease it grants holds a session and a TCP connection until it
// is released or lost; Close ends them all.
type Registry struct {
	servers []string
	root    string
	clock   generator.Clock
	logger  zk.Logger
	ctl     *zk.Conn
	ready   atomic.Bool // root, w and m exist
	closing sync.WaitGroup

	mu struct {
		sync.Mutex
		held   map[int64]*session // by token
		closed bool
	}
}

// Open validates servers ("host:port") and opts and starts connecting to
// the ensemble; it does not wait for a connection (calls fail with
// lease.ErrUnavailable until one is made). Close the Registry.
func Open(servers []string, opts Options) (*Registry, error) {
	if len(servers) == 0 {
		return nil, fmt.Errorf("%w: no zookeeper servers", lease.ErrInvalidConfig)
	}
	if opts.Root == "" {
		opts.Root = zkurl.DefaultRoot
	}
	if err := zkurl.CheckRoot(opts.Root); err != nil {
		return nil, fmt.Errorf("%w: %v", lease.ErrInvalidConfig, err)
	}
	if opts.Clock == nil {
		opts.Clock = generator.SystemClock()
	}
	if opts.Logger == nil {
		opts.Logger = discard{}
	}
	r := &Registry{servers: slices.Clone(servers), root: opts.Root, clock: opts.Clock, logger: opts.Logger}
	r.mu.held = map[int64]*session{}
	ctl, _, err := zk.Connect(r.servers, controlTimeout, zk.WithLogger(r.logger), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", lease.ErrInvalidConfig, err)
	}
	r.ctl = ctl
	return r, nil
}

func init() {
	lease.RegisterScheme(zkurl.Scheme, func(_ context.Context, u string, o lease.OpenOptions) (lease.Registry, func() error, error) {
		r, err := OpenURL(u, Options{Clock: o.Clock})
		if err != nil {
			return nil, nil, err
		}
		return r, r.Close, nil
	})
}

// OpenURL opens the Registry a zk:// URL names (see zkurl.Parse);
// opts.Root is the URL's.
func OpenURL(u string, opts Options) (*Registry, error) {
	servers, root, err := zkurl.Parse(u)
	if err != nil {
		return nil, err
	}
	opts.Root = root
	return Open(servers, opts)
}

type discard struct{}

func (discard) Printf(string, ...any) {}

// Close ends every lease still held through r (their sessions close, so
// the server deletes their w znodes at once, without recording
// last_issued_ms: release them first) and closes r's own session. It
// waits, a few seconds at most, for the sessions to close.
func (r *Registry) Close() error {
	r.mu.Lock()
	if r.mu.closed {
		r.mu.Unlock()
		return nil
	}
	r.mu.closed = true
	held := make([]*session, 0, len(r.mu.held))
	for _, s := range r.mu.held {
		held = append(held, s)
	}
	r.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range held {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.end(s.lost("registry closed"))
		}()
	}
	wg.Wait()
	r.ctl.Close()
	r.closing.Wait() // sessions that ended before
	return nil
}

func (r *Registry) workerPath(id int64) string { return fmt.Sprintf("%s/w/%05d", r.root, id) }
func (r *Registry) markPath(id int64) string   { return fmt.Sprintf("%s/m/%05d", r.root, id) }

// workerVal is the data of a w znode.
type workerVal struct {
	Holder  string `json:"holder"`
	TTLms   int64  `json:"ttl_ms"`
	ClockMs int64  `json:"clock_ms,omitempty"` // the holder's clock report
}

// markVal is the data of an m znode.
type markVal struct {
	Holder       string `json:"holder"`
	Token        int64  `json:"token"`
	LastIssuedMs int64  `json:"last_issued_ms"`
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // plain structs of strings and ints always marshal
	}
	return b
}

// call runs fn, a go-zookeeper call, and returns its result, or
// ctx.Err() as soon as ctx ends (fn then finishes on its own and its
// result is dropped).
func call[T any](ctx context.Context, fn func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	ch := make(chan result, 1)
	go func() {
		v, err := fn()
		ch <- result{v, err}
	}()
	select {
	case res := <-ch:
		return res.v, res.err
	case <-ctx.Done():
		return zero, ctx.Err()
	}
}

// conflict reports whether err is a multi-op's condition failing (a
// znode exists, is missing, or has another version).
func conflict(err error) bool {
	return errors.Is(err, zk.ErrNodeExists) || errors.Is(err, zk.ErrNoNode) || errors.Is(err, zk.ErrBadVersion)
}

// ensure creates the root path and its w and m children once.
func (r *Registry) ensure(ctx context.Context) error {
	if r.ready.Load() {
		return nil
	}
	paths := []string{}
	for i := 1; i < len(r.root); i++ {
		if r.root[i] == '/' {
			paths = append(paths, r.root[:i])
		}
	}
	paths = append(paths, r.root, r.root+"/w", r.root+"/m")
	for _, p := range paths {
		_, err := call(ctx, func() (string, error) { return r.ctl.Create(p, nil, 0, zk.WorldACL(zk.PermAll)) })
		if err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return lease.Unavailable(fmt.Errorf("lease/zookeeper: creating %s: %w", p, err))
		}
	}
	r.ready.Store(true)
	return nil
}

// slot is one worker ID's znodes in a snapshot.
type slot struct {
	live    bool
	worker  workerVal
	wstat   *zk.Stat // nil unless fetched
	hasMark bool
	mark    markVal
	mstat   *zk.Stat // nil unless fetched
}

// used reports whether the worker ID was ever granted (a mark with a
// holder; a claim that lost its race may leave none).
func (s *slot) used() bool { return s != nil && s.hasMark && s.mark.Holder != "" }

// snapshot reads which worker IDs are live and have marks, then fetches
// the znodes want selects (by worker ID and liveness), through r's own
// session after a sync, so that it sees every write acknowledged before.
func (r *Registry) snapshot(ctx context.Context, want func(id int64, live bool) (worker, mark bool)) (map[int64]*slot, error) {
	if _, err := call(ctx, func() (string, error) { return r.ctl.Sync(r.root) }); err != nil && !errors.Is(err, zk.ErrNoNode) {
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
	for _, dir := range []string{"w", "m"} {
		names, err := call(ctx, func() ([]string, error) {
			names, _, err := r.ctl.Children(r.root + "/" + dir)
			return names, err
		})
		if errors.Is(err, zk.ErrNoNode) {
			continue
		}
		if err != nil {
			return nil, lease.Unavailable(err)
		}
		for _, name := range names {
			id, err := strconv.ParseInt(name, 10, 64)
			if err != nil || id < 0 || id > lease.MaxWorkerID {
				continue
			}
			if dir == "w" {
				get(id).live = true
			} else {
				get(id).hasMark = true
			}
		}
	}
	type fetch struct {
		id   int64
		mark bool
	}
	var todo []fetch
	for id, s := range slots {
		w, m := want(id, s.live)
		if w && s.live {
			todo = append(todo, fetch{id, false})
		}
		if m && s.hasMark {
			todo = append(todo, fetch{id, true})
		}
	}
	type got struct {
		fetch
		data []byte
		stat *zk.Stat
		err  error
	}
	results, err := call(ctx, func() ([]got, error) {
		out := make([]got, len(todo))
		sem := make(chan struct{}, fetchers)
		var wg sync.WaitGroup
		for i, f := range todo {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer func() { <-sem; wg.Done() }()
				p := r.workerPath(f.id)
				if f.mark {
					p = r.markPath(f.id)
				}
				data, stat, err := r.ctl.Get(p)
				out[i] = got{f, data, stat, err}
			}()
		}
		wg.Wait()
		return out, nil
	})
	if err != nil {
		return nil, lease.Unavailable(err)
	}
	for _, g := range results {
		s := slots[g.id]
		switch {
		case errors.Is(g.err, zk.ErrNoNode): // gone since the listing
			if g.mark {
				s.hasMark = false
			} else {
				s.live = false
			}
		case g.err != nil:
			return nil, lease.Unavailable(g.err)
		case g.mark:
			json.Unmarshal(g.data, &s.mark) //nolint:errcheck // a damaged mark reads as zero
			s.mstat = g.stat
		default:
			json.Unmarshal(g.data, &s.worker) //nolint:errcheck // a damaged w znode names no holder
			s.wstat = g.stat
		}
	}
	return slots, nil
}

// Acquire implements lease.Registry: it reads the znodes, picks a worker
// ID, opens a session with the TTL as its timeout and claims the worker
// ID through it in one multi-op; on a lost race it reads again and tries
// the next. It fails with ErrInvalidRequest when the server grants a
// session timeout below the TTL (raise the server's maxSessionTimeout).
func (r *Registry) Acquire(ctx context.Context, req lease.Request) (lease.Lease, error) {
	if err := req.Validate(); err != nil {
		return lease.Lease{}, err
	}
	if req.TTL > maxTTL {
		return lease.Lease{}, fmt.Errorf("%w: ttl %v above ZooKeeper's longest session timeout %v", lease.ErrInvalidRequest, req.TTL, maxTTL)
	}
	if r.isClosed() {
		return lease.Lease{}, fmt.Errorf("%w: lease/zookeeper: registry closed", lease.ErrUnavailable)
	}
	if err := r.ensure(ctx); err != nil {
		return lease.Lease{}, err
	}
	inRange := func(id int64, live bool) (bool, bool) { return false, req.Range.Contains(id) && !live }
	slots, err := r.snapshot(ctx, inRange)
	if err != nil {
		return lease.Lease{}, err
	}
	pick := choose(slots, req)
	if pick < 0 {
		return lease.Lease{}, r.allTaken(ctx, req.Range)
	}
	s, err := r.dial(ctx, req)
	if err != nil {
		return lease.Lease{}, err
	}
	for attempt := 0; attempt < int(req.Range.Len())+64; attempt++ {
		if attempt > 0 {
			if slots, err = r.snapshot(ctx, inRange); err != nil {
				break
			}
			if pick = choose(slots, req); pick < 0 {
				err = r.allTaken(ctx, req.Range)
				break
			}
		}
		var l lease.Lease
		var won bool
		l, won, err = s.claim(ctx, pick, slots[pick], req.ClockMs)
		if err != nil {
			break
		}
		if won {
			if !r.hold(s) {
				err = fmt.Errorf("%w: lease/zookeeper: registry closed", lease.ErrUnavailable)
				break
			}
			go s.watch()
			return l, nil
		}
	}
	if err == nil {
		err = fmt.Errorf("%w: lease/zookeeper: too many lost races for range %v", lease.ErrUnavailable, req.Range)
	}
	s.end(err)
	return lease.Lease{}, err
}

// choose picks a worker ID as lease.Registry.Acquire documents (-1: none).
// The most recent own mark wins among the holder's; the oldest mark
// (smallest mzxid) is the longest expired.
func choose(slots map[int64]*slot, req lease.Request) int64 {
	return req.Pick(func(id int64) lease.Slot {
		s := slots[id]
		if s == nil {
			return lease.Slot{}
		}
		out := lease.Slot{Live: s.live, Used: s.used(), Holder: s.mark.Holder}
		if s.mstat != nil {
			out.Seq = s.mstat.Mzxid
		}
		return out
	})
}

// allTaken reads the live leases in rg for an *AllTakenError.
func (r *Registry) allTaken(ctx context.Context, rg lease.Range) error {
	slots, err := r.snapshot(ctx, func(id int64, live bool) (bool, bool) { return rg.Contains(id), rg.Contains(id) })
	if err != nil {
		return err
	}
	var held []lease.Lease
	for id := rg.Min; id <= rg.Max; id++ {
		if s := slots[id]; s != nil && s.live {
			held = append(held, s.lease(id))
		}
	}
	return &lease.AllTakenError{Range: rg, Holders: held}
}

// lease describes slot s of worker ID id: a live one from its w znode
// (LeasedUntil is its mtime, the server's time of the last renewal, plus
// its TTL), a free one from its mark (LeasedUntil zero).
func (s *slot) lease(id int64) lease.Lease {
	l := lease.Lease{WorkerID: id, Holder: s.mark.Holder, Token: s.mark.Token, LastIssuedMs: s.mark.LastIssuedMs}
	if s.live && s.wstat != nil {
		ttl := time.Duration(s.worker.TTLms) * time.Millisecond
		l.Holder, l.Token, l.TTL = s.worker.Holder, s.wstat.Czxid, ttl
		l.LeasedUntil = time.UnixMilli(s.wstat.Mtime).Add(ttl)
		l.ReportedMs = s.worker.ClockMs
	}
	return l
}

// List implements lease.Registry: one sync, two listings and a read of
// every znode (pipelined on r's own session). When a live lease carries a
// clock report, List also writes the root znode's (empty) data once: the
// write's mtime is the server's now, and a report's age is that less the
// mtime of its w znode (the claim's or the last renewal's write), both the
// leader's clock to the millisecond. ZooKeeper has no read of its clock:
// a sync followed by a read shows the time of the last write, not now.
func (r *Registry) List(ctx context.Context) ([]lease.Lease, error) {
	slots, err := r.snapshot(ctx, func(int64, bool) (bool, bool) { return true, true })
	if err != nil {
		return nil, err
	}
	out := make([]lease.Lease, 0, len(slots))
	reports := false
	for id, s := range slots {
		if s.live || s.hasMark {
			l := s.lease(id)
			reports = reports || l.ReportedMs > 0
			out = append(out, l)
		}
	}
	if reports {
		now, err := call(ctx, func() (*zk.Stat, error) { return r.ctl.Set(r.root, nil, -1) })
		if err != nil {
			return nil, lease.Unavailable(fmt.Errorf("lease/zookeeper: reading the server's clock (writing %s): %w", r.root, err))
		}
		for i, l := range out {
			if l.ReportedMs > 0 {
				age := time.Duration(now.Mtime-slots[l.WorkerID].wstat.Mtime) * time.Millisecond
				out[i].ReportAge, out[i].ReportAgeError = max(age, 0), time.Millisecond
			}
		}
	}
	slices.SortFunc(out, func(a, b lease.Lease) int { return int(a.WorkerID - b.WorkerID) })
	return out, nil
}

// Purge deletes the root path and everything under it, live w znodes
// included: only for a namespace of its own that nobody uses any more (a
// test's, a finished scenario run's).
func (r *Registry) Purge(ctx context.Context) error {
	var del func(p string) error
	del = func(p string) error {
		for attempt := 0; ; attempt++ {
			kids, err := call(ctx, func() ([]string, error) { k, _, err := r.ctl.Children(p); return k, err })
			if errors.Is(err, zk.ErrNoNode) {
				return nil
			}
			if err != nil {
				return lease.Unavailable(err)
			}
			for _, k := range kids {
				if err := del(p + "/" + k); err != nil {
					return err
				}
			}
			_, err = call(ctx, func() (struct{}, error) { return struct{}{}, r.ctl.Delete(p, -1) })
			switch {
			case err == nil || errors.Is(err, zk.ErrNoNode):
				return nil
			case errors.Is(err, zk.ErrNotEmpty) && attempt < 8: // a child appeared meanwhile
				continue
			}
			return lease.Unavailable(fmt.Errorf("lease/zookeeper: deleting %s: %w", p, err))
		}
	}
	err := del(r.root)
	r.ready.Store(false)
	return err
}

func (r *Registry) isClosed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mu.closed
}

// hold registers s as a granted lease; false when r is closed.
func (r *Registry) hold(s *session) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.closed {
		return false
	}
	r.mu.held[s.token] = s
	return true
}

// forget drops s from the granted leases.
func (r *Registry) forget(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.mu.held[s.token] == s {
		delete(r.mu.held, s.token)
	}
}

// session returns the session of l, or ErrLost when r holds no such lease.
func (r *Registry) session(l lease.Lease) (*session, error) {
	r.mu.Lock()
	s := r.mu.held[l.Token]
	r.mu.Unlock()
	if s == nil || s.workerID != l.WorkerID || s.holder != l.Holder {
		return nil, fmt.Errorf("%w: worker %d token %d: not held through this registry", lease.ErrLost, l.WorkerID, l.Token)
	}
	return s, nil
}

// Renew implements lease.Registry: one multi-op through the lease's
// session rewrites w (LeasedUntil is its new mtime plus the TTL) and
// raises last_issued_ms in m. It fails at once with ErrUnavailable while
// the session is disconnected.
func (r *Registry) Renew(ctx context.Context, l lease.Lease, lastIssuedMs int64) (lease.Lease, error) {
	s, err := r.session(l)
	if err != nil {
		return lease.Lease{}, err
	}
	return s.write(ctx, opRenew, lastIssuedMs, max(l.ReportedMs, 0))
}

// Record stores lastIssuedMs for l's worker ID, kept as the maximum of the
// stored and given values, while l is still held, without extending it.
// It fails with ErrLost when l has expired, was released, or another
// holder has the worker ID (nothing is written), and with ErrUnavailable
// when the store cannot be reached or did not answer in time.
//
// One multi-op through the lease's session checks w's version and raises
// last_issued_ms in m; w is not rewritten, so neither LeasedUntil nor the
// lease's own deadline moves.
func (r *Registry) Record(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	s, err := r.session(l)
	if err != nil {
		return err
	}
	_, err = s.write(ctx, opRecord, lastIssuedMs, 0)
	return err
}

// Release implements lease.Registry: one multi-op deletes w and raises
// last_issued_ms in m; then the session is closed.
func (r *Registry) Release(ctx context.Context, l lease.Lease, lastIssuedMs int64) error {
	s, err := r.session(l)
	if err != nil {
		return err
	}
	_, err = s.write(ctx, opRelease, lastIssuedMs, 0)
	return err
}
