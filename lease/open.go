package lease

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// MemoryURL names the in-process memory store: leases that live as long
// as the process, for one node or a test.
const MemoryURL = "memory"

// OpenOptions are what a lease store's URL does not say. The zero value
// is the default.
type OpenOptions struct {
	// Clock is the clock a store's client keeps time by where it keeps
	// any (the memory store's expiry, etcd's LeasedUntil estimate,
	// ZooKeeper's renewal deadlines); nil: generator.SystemClock(). A node
	// on a fault clock still opens its store on the real one: a store
	// keeps its own time.
	Clock generator.Clock
	// Schema and Table name a Postgres store's table; empty:
	// public.worker_leases.
	Schema, Table string
	// ReadOnly opens a store for reading (List, Now): a Postgres table is
	// neither created nor migrated, and calls fail when it is missing.
	ReadOnly bool
}

// Opener opens the store a URL of its scheme names, returning the
// Registry and the function that closes its client (nil: nothing to
// close). Errors name what is wrong with the URL or why the store could
// not be reached, wrapping ErrInvalidConfig or ErrUnavailable.
type Opener func(ctx context.Context, rawURL string, o OpenOptions) (Registry, func() error, error)

// openers holds the registered schemes. The backends that need a client
// of their own register themselves (lease/postgres: postgres and
// postgresql; lease/etcd: etcd; lease/zookeeper: zk), so this package
// links none of them: a binary imports the ones it offers.
var openers = struct {
	sync.RWMutex
	m map[string]Opener
}{m: map[string]Opener{}}

// RegisterScheme makes Open dispatch URLs of scheme (lower case, without
// "://") to open. It panics when scheme is registered twice or open is
// nil: a programming error at init.
func RegisterScheme(scheme string, open Opener) {
	openers.Lock()
	defer openers.Unlock()
	if open == nil || scheme == "" || scheme != strings.ToLower(scheme) || scheme == MemoryURL {
		panic(fmt.Sprintf("lease: RegisterScheme(%q): want a lower-case scheme other than %q and an opener", scheme, MemoryURL))
	}
	if _, dup := openers.m[scheme]; dup {
		panic(fmt.Sprintf("lease: scheme %q registered twice", scheme))
	}
	openers.m[scheme] = open
}

// Schemes lists the stores Open can open: "memory" and the registered
// URL schemes, sorted.
func Schemes() []string {
	openers.RLock()
	defer openers.RUnlock()
	s := []string{MemoryURL}
	for k := range openers.m {
		s = append(s, k)
	}
	slices.Sort(s[1:])
	return s
}

// Store is an open lease store: the Registry a URL names, with its
// client.
type Store struct {
	Registry
	// URL is the store's URL with any password replaced (RedactURL).
	URL string

	clock generator.Clock
	close func() error
	once  sync.Once
	err   error
}

// Open opens the lease store rawURL names: "memory", or a URL whose
// scheme a backend registered (postgres://, postgresql://, etcd://,
// zk://; see Schemes). Each backend reads its own URL form:
//
//	postgres://user@host:5432/db?sslmode=disable   (pgx; table o.Schema.o.Table)
//	etcd://host:2379[,host:2379...][/prefix/]       (default prefix /snowchaos/leases/)
//	zk://host:2181[,host:2181...][/root]            (default root /snowchaos/leases)
//
// A URL with an unknown scheme fails with ErrInvalidConfig naming the
// schemes Open knows; every error names the URL, its password redacted.
// Close the Store.
func Open(ctx context.Context, rawURL string, o OpenOptions) (*Store, error) {
	if o.Clock == nil {
		o.Clock = generator.SystemClock()
	}
	st := &Store{URL: RedactURL(rawURL), clock: o.Clock}
	if rawURL == MemoryURL {
		st.Registry = NewMemory(o.Clock)
		return st, nil
	}
	scheme, _, ok := strings.Cut(rawURL, "://")
	openers.RLock()
	open := openers.m[strings.ToLower(scheme)]
	openers.RUnlock()
	if !ok || open == nil {
		return nil, fmt.Errorf("%w: lease store %q: want %s (a scheme://... URL or %q)", ErrInvalidConfig, st.URL, strings.Join(Schemes(), ", "), MemoryURL)
	}
	reg, closer, err := open(ctx, rawURL, o)
	if err != nil {
		return nil, fmt.Errorf("lease store %s: %w", st.URL, err)
	}
	st.Registry, st.close = reg, closer
	return st, nil
}

// Now returns the store's time: the store's own clock where it tells it
// (a Registry with a Now method: Postgres's now()), else the Clock the
// store was opened with.
func (s *Store) Now(ctx context.Context) (time.Time, error) {
	if n, ok := s.Registry.(interface {
		Now(context.Context) (time.Time, error)
	}); ok {
		return n.Now(ctx)
	}
	wall, _ := s.clock.Now()
	return time.Unix(0, wall), nil
}

// Close closes the store's client (once; later calls return the first
// call's error). Leases still held are not released: a Keeper releases
// its own.
func (s *Store) Close() error {
	s.once.Do(func() {
		if s.close != nil {
			s.err = s.close()
		}
	})
	return s.err
}

// RedactURL returns a store URL with its password, if any, replaced by
// "xxxxx", for logs and errors.
func RedactURL(s string) string {
	if u, err := url.Parse(s); err == nil && u.User != nil {
		return u.Redacted()
	}
	scheme := strings.Index(s, "://")
	at := strings.LastIndex(s, "@")
	if scheme < 0 || at < scheme {
		return s
	}
	if user, _, ok := strings.Cut(s[scheme+3:at], ":"); ok {
		return s[:scheme+3] + user + ":xxxxx" + s[at:]
	}
	return s
}
