package main

import (
	"context"
	"log/slog"

	"github.com/snowchaos/snowchaos/lease"
)

// logLeaseEvent logs a lease keeper's state change: INFO when the lease is
// held or released, WARN while renewals fail and when it is lost (the node
// then refuses IDs until it holds one again). The fence reason is shown
// only when the fence is closed (lost), the one state it describes.
func logLeaseEvent(log *slog.Logger, ev lease.Event) {
	level, msg := slog.LevelInfo, "lease state"
	attrs := []any{"state", ev.State.String(), "worker", ev.Lease.WorkerID}
	switch ev.State {
	case lease.StateRenewing:
		level, msg = slog.LevelWarn, "lease renewals failing: the node issues within the safety margin"
	case lease.StateLost:
		level, msg = slog.LevelWarn, "lease lost: the node refuses IDs until it holds a lease again"
		attrs = append(attrs, "reason", ev.Reason.String())
	}
	if ev.Err != nil {
		attrs = append(attrs, "err", ev.Err)
	}
	if ev.Rebind {
		attrs = append(attrs, "rebind", true)
	}
	log.Log(context.Background(), level, msg, attrs...)
}
