package peers

import (
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/oklog/ulid/v2"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
)

var uuidV7Peer = &Peer{
	Name:        "uuidv7",
	Module:      "github.com/google/uuid v1.6.0 (NewV7)",
	Licence:     "BSD-3-Clause",
	Clock:       "the wall clock on every call (time.Now), behind a process-global monotonic guard; no clock hook (only SetRand)",
	CeilingNote: "none: 12-bit sub-ms counter runs ahead of the clock when exhausted, 62 random bits",
	NA: func() map[faults.Kind]string {
		m := naAll(naWallNoHook, clockKinds...)
		m[faults.KindRestart] = "its state (the last-issued time guard) is process-global and unexported: a new instance cannot be made in-process; a real restart resets it"
		m[faults.KindClone] = "no worker ID to duplicate: instances differ by 62 random bits"
		m[faults.KindHandoff] = "no worker ID to hand off"
		return withNoLease(m)
	}(),
	start: func(spec target.NodeSpec, _ *faults.Clock) (instance, error) {
		return &uuidV7{l: spec.Layout}, nil
	},
}

type uuidV7 struct{ l generator.Layout }

func (u *uuidV7) next(dst []generator.ID) (int, error) {
	for i := range dst {
		v, err := uuid.NewV7()
		if err != nil {
			return i, err
		}
		id, err := intern(u.l, v, unixMs(v[:6]))
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

var ulidPeer = &Peer{
	Name:        "ulid",
	Module:      "github.com/oklog/ulid/v2 v2.1.2 (monotonic entropy)",
	Licence:     "Apache-2.0",
	Clock:       "the time it is passed (here the host clock's wall reading, as ulid.Make passes time.Now)",
	CeilingNote: "none: 80-bit entropy incremented by up to 2^32 per ID within a ms",
	Faults:      append([]faults.Kind{faults.KindRestart}, clockKinds...),
	NA: withNoLease(map[faults.Kind]string{
		faults.KindClone:   "no worker ID to duplicate: instances differ by 80 random bits",
		faults.KindHandoff: "no worker ID to hand off",
	}),
	Simulated: true,
	start:     startULID,
}

// startULID builds what ulid.Make uses in a new process: monotonic entropy
// over math/rand seeded with the start's nanoseconds, behind a lock. The
// seed comes from the real clock, as ulid's own does, so two instances
// started at the same virtual instant still differ.
func startULID(spec target.NodeSpec, host *faults.Clock) (instance, error) {
	src := rand.New(rand.NewSource(time.Now().UnixNano() ^ seedSalt()))
	return &ulidGen{
		l:       spec.Layout,
		host:    host,
		entropy: &ulid.LockedMonotonicReader{MonotonicReader: ulid.Monotonic(src, 0)},
	}, nil
}

var salt struct {
	sync.Mutex
	n int64
}

// seedSalt makes two seeds drawn in the same nanosecond differ.
func seedSalt() int64 {
	salt.Lock()
	defer salt.Unlock()
	salt.n++
	return salt.n * 0x5851f42d4c957f2d
}

type ulidGen struct {
	l       generator.Layout
	host    *faults.Clock
	entropy *ulid.LockedMonotonicReader
}

// errBeforeUnix: the host clock reads before 1970; ULID cannot encode it.
var errBeforeUnix = errors.New("peers: host clock before the Unix epoch")

func (u *ulidGen) next(dst []generator.ID) (int, error) {
	for i := range dst {
		wall, _ := u.host.Now()
		if wall < 0 {
			return i, errBeforeUnix
		}
		v, err := ulid.New(uint64(wall/1e6), u.entropy)
		if err != nil {
			return i, err
		}
		id, err := intern(u.l, v, int64(v.Time()))
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

// unixMs reads a 48-bit big-endian millisecond count.
func unixMs(b []byte) int64 {
	return int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
}

// interner maps 128-bit IDs to generator.IDs one to one: the embedded
// millisecond gives the time field, the value's rank among the distinct
// values first seen in that tick gives node and sequence. It lives as
// long as some node of its layout is open.
type interner struct {
	mu   sync.Mutex
	l    generator.Layout
	open int
	ids  map[[16]byte]generator.ID
	rank map[int64]int64 // tick: next free rank
}

var interners = struct {
	sync.Mutex
	m map[string]*interner
}{m: map[string]*interner{}}

func layoutKey(l generator.Layout) string {
	return fmt.Sprintf("%d/%d/%d@%s/%d", l.TimeBits, l.NodeBits, l.SeqBits, l.Tick, l.Epoch.UnixNano())
}

func internerFor(l generator.Layout) *interner {
	interners.Lock()
	defer interners.Unlock()
	k := layoutKey(l)
	in := interners.m[k]
	if in == nil {
		in = &interner{l: l}
		interners.m[k] = in
	}
	return in
}

// acquire holds layout l's interner open until the returned func runs;
// the table is dropped when no node of the layout is open.
func acquire(l generator.Layout) func() {
	in := internerFor(l)
	in.mu.Lock()
	in.open++
	in.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			in.mu.Lock()
			in.open--
			if in.open == 0 {
				in.ids, in.rank = nil, nil
			}
			in.mu.Unlock()
		})
	}
}

// errInternFull: more distinct 128-bit IDs in one tick than the layout's
// node and sequence fields hold.
var errInternFull = errors.New("peers: too many distinct IDs in one tick for the layout")

// intern returns the generator.ID of the 128-bit value v whose embedded
// time is ms (Unix milliseconds).
func intern(l generator.Layout, v [16]byte, ms int64) (generator.ID, error) {
	in := internerFor(l)
	in.mu.Lock()
	defer in.mu.Unlock()
	if id, ok := in.ids[v]; ok {
		return id, nil
	}
	if in.ids == nil {
		in.ids, in.rank = map[[16]byte]generator.ID{}, map[int64]int64{}
	}
	tick := l.TickOf(ms * int64(time.Millisecond))
	r := in.rank[tick]
	if r > (l.MaxNode()<<l.SeqBits | l.MaxSeq()) {
		return 0, errInternFull
	}
	id, err := compose(l, tick, r>>l.SeqBits, r&l.MaxSeq())
	if err != nil {
		return 0, err
	}
	in.rank[tick] = r + 1
	in.ids[v] = id
	return id, nil
}
