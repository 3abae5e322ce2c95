package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
	"github.com/snowchaos/snowchaos/lease/leasetest"
)

// TestOpenMemory: "memory" opens the memory store on the clock given,
// which is also the store's time.
func TestOpenMemory(t *testing.T) {
	clock := leasetest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	st, err := lease.Open(context.Background(), lease.MemoryURL, lease.OpenOptions{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, ok := st.Registry.(*lease.Memory); !ok || st.URL != "memory" {
		t.Fatalf("memory opened %T (%s)", st.Registry, st.URL)
	}
	l, err := st.Acquire(context.Background(), lease.Request{Holder: "h", Range: lease.Range{Max: 3}, TTL: time.Second})
	if err != nil || !l.LeasedUntil.Equal(time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)) {
		t.Fatalf("Acquire on the memory store = %+v, %v; want a lease until the clock's now + 1s", l, err)
	}
	if now, err := st.Now(context.Background()); err != nil || !now.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("Now = %v, %v; want the clock's", now, err)
	}
}

// fakeRegistry is a registry of the test's "fake" scheme, with a store
// clock of its own.
type fakeRegistry struct {
	*lease.Memory
	url    string
	opts   lease.OpenOptions
	closed int
}

func (f *fakeRegistry) Now(context.Context) (time.Time, error) {
	return time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), nil
}

// TestOpenDispatch: a URL goes, whole, to the opener its scheme (in any
// case) registered, with the options; the store's Now is the registry's
// own when it has one; Close closes the client once; an opener's error
// names the URL without its password; an unknown scheme lists the known
// ones.
func TestOpenDispatch(t *testing.T) {
	var last *fakeRegistry
	lease.RegisterScheme("fake", func(_ context.Context, u string, o lease.OpenOptions) (lease.Registry, func() error, error) {
		if strings.Contains(u, "fail") {
			return nil, nil, lease.Unavailable(errors.New("no route"))
		}
		last = &fakeRegistry{Memory: lease.NewMemory(nil), url: u, opts: o}
		return last, func() error { last.closed++; return nil }, nil
	})
	o := lease.OpenOptions{Schema: "s", Table: "t", ReadOnly: true}
	st, err := lease.Open(context.Background(), "FAKE://u:secret@h:1/x?y=z", o)
	if err != nil {
		t.Fatal(err)
	}
	if last.url != "FAKE://u:secret@h:1/x?y=z" || last.opts.Schema != "s" || last.opts.Table != "t" || !last.opts.ReadOnly || last.opts.Clock == nil {
		t.Fatalf("the opener got %q %+v", last.url, last.opts)
	}
	if strings.Contains(st.URL, "secret") || !strings.Contains(st.URL, "u:xxxxx@h:1") {
		t.Fatalf("Store.URL %q does not hide the password", st.URL)
	}
	if now, _ := st.Now(context.Background()); now.Year() != 2030 {
		t.Fatalf("Now = %v, want the registry's own", now)
	}
	st.Close()
	st.Close()
	if last.closed != 1 {
		t.Fatalf("client closed %d times, want 1", last.closed)
	}
	if _, err := lease.Open(context.Background(), "fake://u:secret@fail/", o); !errors.Is(err, lease.ErrUnavailable) ||
		strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "fake://u:xxxxx@fail/") {
		t.Fatalf("a failing opener: %v; want its error naming the redacted URL", err)
	}
	for _, u := range []string{"carrier-pigeon", "mysql://h/db", "", "Memory", "fake:/h"} {
		_, err := lease.Open(context.Background(), u, o)
		if !errors.Is(err, lease.ErrInvalidConfig) || !strings.Contains(err.Error(), "memory, fake") || !strings.Contains(err.Error(), u) {
			t.Errorf("Open(%q) = %v; want ErrInvalidConfig naming it and the known stores", u, err)
		}
	}
	for _, bad := range []string{"fake", "Upper", "", lease.MemoryURL} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterScheme(%q) did not panic", bad)
				}
			}()
			lease.RegisterScheme(bad, func(context.Context, string, lease.OpenOptions) (lease.Registry, func() error, error) {
				return nil, nil, nil
			})
		}()
	}
}

func TestRedactURL(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://u:secret@h:5432/db?sslmode=disable": "postgres://u:xxxxx@h:5432/db?sslmode=disable",
		"etcd://u:secret@a:1,b:2/p/":                    "etcd://u:xxxxx@a:1,b:2/p/",
		"postgres://u@h/db":                             "postgres://u@h/db",
		"zk://a:1,b:2/root":                             "zk://a:1,b:2/root",
		"memory":                                        "memory",
	} {
		if got := lease.RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
}
