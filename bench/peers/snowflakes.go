package peers

import (
	"sync"
	"time"

	"github.com/bwmarrin/snowflake"
	"github.com/sony/sonyflake"
	sonyflakev2 "github.com/sony/sonyflake/v2"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
)

// Reasons shared by the peers that cannot take a clock fault while running.
const (
	naMonotonic  = "reads Go's monotonic clock (time.Since(epoch)) while running: no wall-clock fault reaches a running process; the wall clock is read once, at NewNode (see restart after a rewind)"
	naWallNoHook = "reads the wall clock (time.Now) on every call with no hook to inject a fault in-process: a real NTP step does reach it, this harness cannot apply one"
	naNoLease    = "takes no worker-ID lease: there is no lease store to cut off"
)

// clockKinds are the fault kinds that act on a running node's clock.
var clockKinds = faults.KindsOf(faults.ScopeClock, faults.InScenario)

// withNoLease adds to m the reason every peer shares for a lease-store
// outage, and returns m.
func withNoLease(m map[faults.Kind]string) map[faults.Kind]string {
	m[faults.KindStoreOutage] = naNoLease
	m[faults.KindStoreStep], m[faults.KindStoreDrift], m[faults.KindStorePause] = naNoLease, naNoLease, naNoLease
	return m
}

// naAll maps every kind in kinds to why.
func naAll(why string, kinds ...faults.Kind) map[faults.Kind]string {
	m := map[faults.Kind]string{}
	for _, k := range kinds {
		m[k] = why
	}
	return m
}

// lifecycle are the faults a Snowflake-style library with a machine ID
// takes: a restart (a new instance), a clone (a second instance with the
// same machine ID) and a handoff (its machine ID started on another host).
var lifecycle = []faults.Kind{faults.KindRestart, faults.KindClone, faults.KindHandoff}

var bwmarrinPeer = &Peer{
	Name:        "bwmarrin",
	Module:      "github.com/bwmarrin/snowflake v0.3.0",
	Licence:     "BSD-2-Clause",
	Clock:       "the wall clock once at NewNode, then Go's monotonic clock (time.Since(epoch))",
	Ceiling:     4096 * 1000,
	CeilingNote: "12-bit step per 1 ms",
	Faults:      lifecycle,
	NA:          withNoLease(naAll(naMonotonic, clockKinds...)),
	start:       startBwmarrin,
}

// bwmarrinMu serialises writes of snowflake.Epoch, which NewNode reads.
var bwmarrinMu sync.Mutex

// startBwmarrin builds a snowflake.Node whose epoch is the layout's epoch
// as the host's wall clock sees it: NewNode computes its epoch from
// time.Now(), so shifting Epoch by the host's offset is exactly what a
// process on that host would get.
func startBwmarrin(spec target.NodeSpec, host *faults.Clock) (instance, error) {
	l := spec.Layout
	if err := fits(l, "bwmarrin", time.Millisecond, spec.Worker, 10, 12); err != nil {
		return nil, err
	}
	epoch := l.Epoch.UnixMilli() - host.Offset().Milliseconds()
	bwmarrinMu.Lock()
	saved := snowflake.Epoch
	snowflake.Epoch = epoch
	n, err := snowflake.NewNode(spec.Worker)
	snowflake.Epoch = saved
	bwmarrinMu.Unlock()
	if err != nil {
		return nil, err
	}
	return &bwmarrin{n: n, l: l, msTicks: int64(time.Millisecond / l.Tick)}, nil
}

type bwmarrin struct {
	n       *snowflake.Node
	l       generator.Layout
	msTicks int64
}

func (b *bwmarrin) next(dst []generator.ID) (int, error) {
	for i := range dst {
		v := b.n.Generate().Int64()
		id, err := compose(b.l, (v>>22)*b.msTicks, v>>12&0x3ff, v&0xfff)
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

// sonyflakeTick is both sonyflakes' time unit (their default).
const sonyflakeTick = 10 * time.Millisecond

var sonyflakePeer = &Peer{
	Name:        "sonyflake",
	Module:      "github.com/sony/sonyflake v1.2.0",
	Licence:     "MIT",
	Clock:       "the wall clock on every call (time.Now().UTC().UnixNano()); no clock hook",
	Ceiling:     256 * 100,
	CeilingNote: "8-bit sequence per 10 ms",
	Faults:      lifecycle,
	NA:          withNoLease(naAll(naWallNoHook, clockKinds...)),
	start:       startSonyflake,
}

var sonyflakeV2Peer = &Peer{
	Name:        "sonyflake-v2",
	Module:      "github.com/sony/sonyflake/v2 v2.2.0",
	Licence:     "MIT",
	Clock:       "the wall clock on every call (time.Now().UTC().UnixNano()); Settings has no time source",
	Ceiling:     256 * 100,
	CeilingNote: "8-bit sequence per 10 ms (default bits)",
	Faults:      lifecycle,
	NA:          withNoLease(naAll(naWallNoHook, clockKinds...)),
	start:       startSonyflakeV2,
}

// startTime is the StartTime that makes a sonyflake on host count from
// the layout's epoch as the host's wall clock sees it: sonyflake computes
// elapsed time as time.Now() minus StartTime, so shifting StartTime by the
// host's offset is what a process on that host would get.
func startTime(l generator.Layout, host *faults.Clock) time.Time {
	return l.Epoch.Add(-host.Offset())
}

func startSonyflake(spec target.NodeSpec, host *faults.Clock) (instance, error) {
	l := spec.Layout
	if err := fits(l, "sonyflake", sonyflakeTick, spec.Worker, 16, 8); err != nil {
		return nil, err
	}
	sf, err := sonyflake.New(sonyflake.Settings{
		StartTime: startTime(l, host),
		MachineID: func() (uint16, error) { return uint16(spec.Worker), nil },
	})
	if err != nil {
		return nil, err
	}
	return &sonyflakeV1{sf: sf, l: l, ticks: int64(sonyflakeTick / l.Tick)}, nil
}

type sonyflakeV1 struct {
	sf    *sonyflake.Sonyflake
	l     generator.Layout
	ticks int64 // layout ticks per sonyflake tick
}

func (s *sonyflakeV1) next(dst []generator.ID) (int, error) {
	for i := range dst {
		v, err := s.sf.NextID()
		if err != nil {
			return i, err
		}
		id, err := sonyflakeID(s.l, int64(v), s.ticks)
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}

// sonyflakeID re-encodes a 39/8/16 sonyflake ID (time, sequence, machine)
// in layout l (time, node, sequence).
func sonyflakeID(l generator.Layout, v, ticks int64) (generator.ID, error) {
	return compose(l, (v>>24)*ticks, v&0xffff, v>>16&0xff)
}

func startSonyflakeV2(spec target.NodeSpec, host *faults.Clock) (instance, error) {
	l := spec.Layout
	if err := fits(l, "sonyflake-v2", sonyflakeTick, spec.Worker, 16, 8); err != nil {
		return nil, err
	}
	sf, err := sonyflakev2.New(sonyflakev2.Settings{
		StartTime: startTime(l, host),
		MachineID: func() (int, error) { return int(spec.Worker), nil },
	})
	if err != nil {
		return nil, err
	}
	return &sonyflakeV2{sf: sf, l: l, ticks: int64(sonyflakeTick / l.Tick)}, nil
}

type sonyflakeV2 struct {
	sf    *sonyflakev2.Sonyflake
	l     generator.Layout
	ticks int64
}

func (s *sonyflakeV2) next(dst []generator.ID) (int, error) {
	for i := range dst {
		v, err := s.sf.NextID()
		if err != nil {
			return i, err
		}
		id, err := sonyflakeID(s.l, v, s.ticks)
		if err != nil {
			return i, err
		}
		dst[i] = id
	}
	return len(dst), nil
}
