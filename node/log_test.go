package node

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/lease"
)

// TestLeaseEventLog checks the level and attributes of each lease state
// change: a loss is a warning with its real reason; a held lease shows no
// fence reason (it used to say "no lease acquired", the zero reason).
func TestLeaseEventLog(t *testing.T) {
	held := lease.Lease{WorkerID: 4}
	storeDown := errors.New("store unavailable")
	for _, tc := range []struct {
		ev        lease.Event
		has, lack []string
	}{
		{lease.Event{State: lease.StateHeld, Lease: held}, []string{"level=INFO", "state=held", "worker=4"}, []string{"reason", "err=", "no lease acquired"}},
		{lease.Event{State: lease.StateRenewing, Lease: held, Err: storeDown}, []string{"level=WARN", "state=renewing", "store unavailable"}, []string{"reason"}},
		{lease.Event{State: lease.StateLost, Lease: held, Reason: lease.ReasonRenewFailures, Err: storeDown},
			[]string{"level=WARN", "state=lost", `reason="renewals failing"`, "store unavailable"}, []string{"level=INFO"}},
		{lease.Event{State: lease.StateHeld, Lease: held, Rebind: true}, []string{"level=INFO", "rebind=true"}, []string{"reason"}},
		{lease.Event{State: lease.StateReleased, Lease: held, Reason: lease.ReasonReleased}, []string{"level=INFO", "state=released"}, []string{"reason"}},
		{lease.Event{State: lease.StateHeld, Lease: held, PeerCheck: &lease.PeerCheck{Bound: time.Second}},
			[]string{"level=INFO", "no live peer reports a clock", "state=held"}, []string{"WARN", "ERROR"}},
		{lease.Event{State: lease.StateHeld, Lease: held, PeerCheck: &lease.PeerCheck{Peers: make([]lease.PeerClock, 2), Skew: -3 * time.Millisecond, Bound: time.Second}},
			[]string{"level=INFO", "peer clock check passed", "skew=-3ms", "peers=2", "state=held"}, []string{"WARN", "ERROR"}},
		{lease.Event{State: lease.StateIdle, Err: errors.New("lease: peer clock skew: ..."), PeerCheck: &lease.PeerCheck{Peers: make([]lease.PeerClock, 2), Skew: -10 * time.Second, Bound: time.Second, Refused: true}},
			[]string{"level=ERROR", "refused the start", "skew=-10s", "peers=2"}, []string{"state="}},
	} {
		var b bytes.Buffer
		n := &Node{log: slog.New(slog.NewTextHandler(&b, nil))}
		n.leaseChanged(tc.ev)
		for _, h := range tc.has {
			if !strings.Contains(b.String(), h) {
				t.Errorf("%v: %q lacks %q", tc.ev.State, b.String(), h)
			}
		}
		for _, l := range tc.lack {
			if strings.Contains(b.String(), l) {
				t.Errorf("%v: %q has %q", tc.ev.State, b.String(), l)
			}
		}
	}
}
