package generator

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

var (
	propSeed = flag.Uint64("prop.seed", 0, "run the property tests with only this seed (0: fixed seeds plus one random)")
	propRuns = flag.Int("prop.runs", 150, "property test schedules per policy")
)

// propSeeds returns the seeds to run: fixed ones (reproducible in CI) plus
// a fresh random one, or only -prop.seed.
func propSeeds() []uint64 {
	if *propSeed != 0 {
		return []uint64{*propSeed}
	}
	n := *propRuns
	if testing.Short() {
		n = 20
	}
	seeds := make([]uint64, 0, n+1)
	for i := range n {
		seeds = append(seeds, uint64(i)+1)
	}
	return append(seeds, rand.Uint64())
}

// documented reports whether err wraps one of the errors Next documents.
func documented(err error) bool {
	for _, e := range []error{ErrClockBackwards, ErrWaitExceeded, ErrLeadExceeded, ErrBeforeEpoch, ErrLifetime, ErrFenced, ErrCheckpoint, ErrClosed, ErrPanic} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// schedule runs one random fault schedule against one policy and returns
// a description of the first broken invariant, or "".
func schedule(seed uint64, policy Policy) string {
	r := rand.New(rand.NewPCG(seed, uint64(policy)))
	ps := Presets()
	l := ps[r.IntN(len(ps))]
	pick := func(ds ...time.Duration) time.Duration { return ds[r.IntN(len(ds))] }
	c := newScriptClock(t0.Add(time.Duration(r.Int64N(int64(time.Hour)))))
	cp := &memCheckpoint{}
	node := r.Int64N(l.MaxNode() + 1)
	s := Settings{
		Layout: l, Node: node, Policy: policy, Clock: c, Checkpoint: cp,
		MaxWait: pick(time.Millisecond, 5*time.Millisecond, 50*time.Millisecond, time.Second),
		MaxLead: pick(time.Millisecond, 20*time.Millisecond, time.Second),
		Reserve: pick(10*time.Millisecond, 100*time.Millisecond, time.Second),
	}
	g, err := New(s)
	if err != nil {
		return fmt.Sprintf("New: %v", err)
	}
	tickNs := int64(l.Tick)
	var last ID = -1
	issued := 0
	check := func(ids []ID) string {
		wall, _ := c.Now()
		wt := l.TickOf(wall)
		for _, id := range ids {
			if id <= last {
				return fmt.Sprintf("ID %d after %d (not strictly increasing; a repeat if equal)", id, last)
			}
			last = id
			p := l.Decode(id)
			if p.Node != node {
				return fmt.Sprintf("ID %d has node %d, want %d", id, p.Node, node)
			}
			if lead := (p.Tick - wt) * tickNs; policy == PolicyLogical && lead > int64(s.MaxLead) {
				return fmt.Sprintf("ID %d leads the wall clock by %v > MaxLead %v", id, time.Duration(lead), s.MaxLead)
			} else if policy != PolicyLogical && lead > 0 {
				return fmt.Sprintf("ID %d is %v ahead of the wall clock under %v", id, time.Duration(lead), policy)
			}
		}
		issued += len(ids)
		return ""
	}
	// call runs one generator call and checks its monotonic budget.
	call := func(f func() ([]ID, error)) string {
		_, before := c.Now()
		ids, err := f()
		_, after := c.Now()
		if d := time.Duration(after - before); d > s.MaxWait {
			return fmt.Sprintf("a call blocked %v > MaxWait %v", d, s.MaxWait)
		}
		if err != nil && !documented(err) {
			return fmt.Sprintf("undocumented error %v", err)
		}
		return check(ids)
	}
	dst := make([]ID, 3000)
	for op := 0; op < 400; op++ {
		var msg string
		switch k := r.IntN(100); {
		case k < 40:
			msg = call(func() ([]ID, error) {
				id, err := g.Next()
				if err != nil {
					return nil, err
				}
				return []ID{id}, nil
			})
		case k < 55:
			n := 1 + r.IntN(len(dst))
			msg = call(func() ([]ID, error) {
				got, err := g.NextN(dst[:n])
				if (got < n) != (err != nil) {
					return nil, fmt.Errorf("NextN(%d) = %d, %v", n, got, err)
				}
				return dst[:got], err
			})
		case k < 72:
			c.Advance(time.Duration(r.Int64N(2 * tickNs)))
		case k < 80:
			c.Step(-time.Duration(r.Int64N(int64(pick(3*time.Millisecond, 50*time.Millisecond, 2*time.Second)))))
		case k < 85:
			c.Step(time.Duration(r.Int64N(int64(20 * time.Millisecond))))
		case k < 90:
			c.Freeze(r.IntN(2) == 0)
		case k < 93:
			_ = g.Ready()
		case k < 95:
			// What a call that lost fastTries races does: send every
			// call to the slow path.
			g.state.Or(slowBit)
		default:
			// Restart, cleanly or by crashing.
			if r.IntN(2) == 0 {
				if err := g.Close(); err != nil {
					return fmt.Sprintf("Close: %v", err)
				}
			}
			if g, err = New(s); err != nil {
				return fmt.Sprintf("restart: %v", err)
			}
		}
		if msg != "" {
			return fmt.Sprintf("op %d: %s", op, msg)
		}
	}
	if st := g.Stats(); st.Issued > uint64(issued) {
		return fmt.Sprintf("Stats.Issued %d > %d collected", st.Issued, issued)
	}
	return ""
}

// TestPropertyRandomFaults: under random schedules of clock steps, freezes,
// rewinds, restarts (clean and crashed) and batch sizes, every policy
// issues strictly increasing IDs that never repeat, never blocks a call
// past MaxWait, never leads past MaxLead (logical) and never runs ahead of
// the wall clock (wait, refuse).
func TestPropertyRandomFaults(t *testing.T) {
	for _, p := range []Policy{PolicyWait, PolicyRefuse, PolicyLogical} {
		t.Run(p.String(), func(t *testing.T) {
			for _, seed := range propSeeds() {
				if msg := schedule(seed, p); msg != "" {
					t.Fatalf("seed %d (rerun: go test -run 'TestPropertyRandomFaults/%v' -prop.seed %d): %s", seed, p, seed, msg)
				}
			}
		})
	}
}

// TestPropertyConcurrent: 2-8 goroutines issue while another injects clock
// faults and, as a call that lost its races does, sends every call to the
// slow path; no ID repeats and each goroutine's IDs increase.
func TestPropertyConcurrent(t *testing.T) {
	seeds := propSeeds()
	seeds = append(seeds[:min(len(seeds)-1, 5)], seeds[len(seeds)-1])
	for _, p := range []Policy{PolicyWait, PolicyRefuse, PolicyLogical} {
		for _, seed := range seeds {
			r := rand.New(rand.NewPCG(seed, 99))
			c := newScriptClock(t0)
			s := Settings{Policy: p, Clock: c, Checkpoint: &memCheckpoint{}, Reserve: 20 * time.Millisecond, MaxLead: 30 * time.Millisecond, MaxWait: 20 * time.Millisecond}
			g, err := New(s)
			if err != nil {
				t.Fatal(err)
			}
			workers := 2 + r.IntN(7)
			const perWorker = 2000
			out := make([][]ID, workers)
			var calls atomic.Int64
			var wg sync.WaitGroup
			for w := range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					dst := make([]ID, 50)
					for i := range perWorker {
						calls.Add(1)
						if i%3 == 0 {
							if n, _ := g.NextN(dst[:1+i%50]); n > 0 {
								out[w] = append(out[w], dst[:n]...)
							}
						} else if id, err := g.Next(); err == nil {
							out[w] = append(out[w], id)
						}
					}
				}()
			}
			// Inject a fault every 20 calls or so until the workers finish.
			limit := time.Now().Add(time.Minute)
			for next := int64(20); calls.Load() < int64(workers*perWorker); runtime.Gosched() {
				if time.Now().After(limit) {
					t.Fatalf("workers made no progress")
				}
				if calls.Load() < next {
					continue
				}
				next += 20
				switch r.IntN(5) {
				case 0:
					c.Step(-time.Duration(r.Int64N(int64(10 * time.Millisecond))))
				case 4:
					g.state.Or(slowBit)
				case 1:
					c.Freeze(r.IntN(3) == 0)
				default:
					c.Advance(time.Duration(r.Int64N(int64(time.Millisecond))))
				}
			}
			wg.Wait()
			seen := make(map[ID]int)
			for w, ids := range out {
				for i, id := range ids {
					if i > 0 && id <= ids[i-1] {
						t.Fatalf("%v seed %d: worker %d: %d after %d", p, seed, w, id, ids[i-1])
					}
					if v, dup := seen[id]; dup {
						t.Fatalf("%v seed %d: %d issued to workers %d and %d", p, seed, id, v, w)
					}
					seen[id] = w
				}
			}
		}
	}
}
