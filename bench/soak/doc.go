// Package soak runs snowchaos serve for minutes under everything at once
// and checks that it stays correct and does not grow: a checkpoint and a
// Postgres lease (a cluster of its own, initdb into the soak's
// directory), a paced load whose every ID goes to the verify sink
// (snowchaos verify --listen), clock faults through the admin API in turn
// (steps back and forward, freezes, leaps, smears, pauses), a kill -9
// restart every minute, and a crash of the lease store's Postgres for
// twenty seconds. It samples the serve process's RSS and goroutines and
// judges them flat (Judge, Limits). make soak runs it (docs/soak.md).
//
// It is a study, like the peers' tables, and lives in the bench module:
// it drives built binaries and a Postgres of its own for minutes, which
// no test of the main module should; its judgement (Judge) is unit-tested
// in bench-test, which CI runs.
package soak
