package harness

import (
	"context"
	"errors"
	"fmt"

	"github.com/snowchaos/snowchaos/harness/target"
)

// Crash points (a restart's point): the restart arms the node's host
// (target.CrashPointer) and the node crashes the first time a call
// reaches the point, at or after the fault's time. Only simulated runs
// place them, exactly: there the driver serves one call at a time, so
// the requests "in flight" at the crash are served at the point itself,
// by inFlight, and the crash is handled as soon as the call that
// reached it returns (crashed).

// inFlightClient is the client number of the requests in flight at a
// crash: a stream of its own, apart from the load's clients.
const inFlightClient = 1 << 20

// armCrash arms restart fault fi's crash point on the slot's node; the
// fault stays unconfirmed until the crash strikes. It returns false when
// the point cannot be placed: in real mode the fault is unconfirmed; on a
// node that keeps no checkpoint (a known-bad reference generator, whose
// every call is the same to it) the caller crashes it between calls now,
// as a restart without a point, and the detail says so.
func (l *lifecycle) armCrash(fi int, sl *slot) bool {
	f := l.s.Faults[fi]
	if !l.simulated() {
		l.unconfirmed(fi, sl.name+": crash points are placed only in simulated mode")
		return true
	}
	cp, ok := sl.node.(target.CrashPointer)
	if !ok || sl.node == nil || !sl.up {
		l.unconfirmed(fi, sl.name+": the node cannot crash at a point (not running, or its target has no crash points)")
		return true
	}
	if err := cp.ArmCrash(f.Point, func() { l.inFlight(sl) }); err != nil {
		if errors.Is(err, target.ErrUnsupported) && l.info.KnownBad {
			l.detail(fi, sl.name+": "+err.Error()+": crashed between calls")
			return false
		}
		l.unconfirmed(fi, sl.name+": "+err.Error())
		return true
	}
	sl.armed = fi + 1
	l.unconfirmed(fi, fmt.Sprintf("%s: crash armed at %s from %s", sl.name, f.Point, Duration(l.d.now())))
	return true
}

// inFlight serves one single-ID request that was in flight on the slot's
// node when its crash struck: answered before the process died, without
// waiting (the crash comes first), so whatever it got was issued.
func (l *lifecycle) inFlight(sl *slot) {
	v := sl.current()
	if !v.up || v.node == nil {
		return
	}
	ctx, cancel := context.WithCancel(l.ctx)
	cancel()
	buf := newIDBuf(l.kind, 1)
	at := sl.host.now()
	err := buf.issue(target.WithClient(ctx, inFlightClient), v.node)
	l.record(v, inFlightClient, at, at, buf, err, ownOffset(v))
}

// crashed handles an armed crash that struck during the call just
// served: the node is stopped as a killed process (its disk keeps what
// was synced) and comes back as the restart says. It reports whether the
// crash struck.
func (l *lifecycle) crashed(sl *slot) bool {
	if sl.armed == 0 || sl.node == nil {
		return false
	}
	cp, ok := sl.node.(target.CrashPointer)
	if !ok || !cp.Crashed() {
		return false
	}
	fi := sl.armed - 1
	sl.armed = 0
	f := l.s.Faults[fi]
	now := l.d.now()
	l.faults[fi].Confirmed = true
	l.detail(fi, fmt.Sprintf("%s: crashed at %s at %s", sl.name, f.Point, Duration(now)))
	if err := l.stopSlot(sl, target.StopOptions{}, "crashed at "+f.Point); err != nil && !errors.Is(err, target.ErrStopped) {
		l.stopFailed(fi, sl, err)
	}
	if f.For == 0 {
		l.bringUp(fi, sl)
	} else {
		l.d.schedule(now+f.For, upEvent{fi, sl.idx})
	}
	l.changed()
	return true
}
