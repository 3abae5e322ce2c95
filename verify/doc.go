// Package verify checks the IDs a run issued, as they arrive: exact
// duplicate detection in compact memory (Set), and every invariant of a
// chaos run in one pass (Verifier): zero duplicates across nodes, clones
// and restarts, strict order per sequential stream, restart monotonicity,
// embedded-time lead and lag against reference time, availability and the
// longest gap per fault window, and the longest wait.
//
// A Verifier checks one Kind of ID, chosen at construction:
//
//   - KindSnowflake (the zero value): 63-bit IDs in any generator.Layout
//     (any split of time, node and sequence bits, any epoch and tick), fed
//     with Observe. This is the harness's path and it allocates nothing
//     per ID.
//   - KindUUIDv7 and KindULID: 128-bit IDs with a 48-bit Unix millisecond
//     time, fed with ObserveWide; duplicates, order, restarts, lead and
//     lag are all checked.
//   - KindUUIDv4 and KindUUID: 128-bit IDs without time or order, fed
//     with ObserveWide; duplicates only.
//   - KindString: opaque strings, fed with ObserveStrings; duplicates
//     only, compared byte for byte.
//
// Results report IDs as Values, whatever their kind, and say (Ordered,
// Timed) which figures apply. The parsers (ParseUUID, ParseULID,
// ParseSnowflake, ParseString) are strict and name the bad value.
//
// Nothing here reads a clock. The harness supplies reference (true) times
// with every Observation, so a simulated run gives the same Result every
// time.
package verify
