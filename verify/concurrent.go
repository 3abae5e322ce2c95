package verify

import "sync"

// Concurrent is a Verifier safe for many goroutines: each method takes one
// mutex, held for the length of the underlying call, so feed it batches
// rather than single IDs when feeders are many (see BenchmarkConcurrent).
type Concurrent struct {
	mu struct {
		sync.Mutex
		v *Verifier
	}
}

// NewConcurrent returns a Concurrent Verifier for cfg.
func NewConcurrent(cfg Config) *Concurrent {
	c := &Concurrent{}
	c.mu.v = New(cfg)
	return c
}

// Issuer is Verifier.Issuer.
func (c *Concurrent) Issuer(name string, incarnation int, worker int64) IssuerID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.Issuer(name, incarnation, worker)
}

// Register is Verifier.Register.
func (c *Concurrent) Register(s IssuerSpec) IssuerID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.Register(s)
}

// FaultWindow is Verifier.FaultWindow.
func (c *Concurrent) FaultWindow(name string, start, end int64) WindowID {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.FaultWindow(name, start, end)
}

// EndWindow is Verifier.EndWindow.
func (c *Concurrent) EndWindow(id WindowID, end int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.mu.v.EndWindow(id, end)
}

// Observe is Verifier.Observe. o.IDs is not retained, so the caller may
// reuse it once Observe returns.
func (c *Concurrent) Observe(o Observation) Found {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.Observe(o)
}

// ObserveWide is Verifier.ObserveWide. ids is not retained.
func (c *Concurrent) ObserveWide(o Observation, ids []ID128) Found {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.ObserveWide(o, ids)
}

// ObserveStrings is Verifier.ObserveStrings. ids is not retained.
func (c *Concurrent) ObserveStrings(o Observation, ids []string) Found {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.ObserveStrings(o, ids)
}

// Kind is Verifier.Kind.
func (c *Concurrent) Kind() Kind { return c.mu.v.Kind() }

// Progress is Verifier.Progress.
func (c *Concurrent) Progress() Progress {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.Progress()
}

// Result is Verifier.Result.
func (c *Concurrent) Result() Result {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mu.v.Result()
}
