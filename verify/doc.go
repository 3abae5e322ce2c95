// Package verify checks the IDs a run issued, as they arrive: exact
// duplicate detection in compact memory (Set), and every invariant of a
// chaos run in one pass (Verifier): zero duplicates across nodes, clones
// and restarts, strict order per sequential stream, restart monotonicity,
// embedded-time lead and lag against reference time, availability and the
// longest gap per fault window, and the longest wait.
//
// Nothing here reads a clock. The harness supplies reference (true) times
// with every Observation, so a simulated run gives the same Result every
// time.
package verify
