// Package generator is a Snowflake-style 64-bit ID generator that stays
// unique when the clock misbehaves. It imports only the standard library.
//
// An ID packs a time field (ticks since an epoch), a node field and a
// per-tick sequence into 63 bits (see Layout and its presets). A Generator
// issues IDs for one node that are unique and strictly increasing in issue
// order, under these rules:
//
//   - Time comes only from an injected Clock: a wall reading that goes into
//     IDs and a monotonic reading that bounds waiting. Sleeping goes through
//     the Clock too, so a virtual clock can serve waits without blocking.
//   - When the wall clock is behind the last issued tick (an NTP step, a
//     leap second, a VM restore), the Policy decides: refuse at once, wait
//     for the clock to catch up, or keep issuing on a logical clock whose
//     lead over the wall clock is bounded by MaxLead.
//   - Every call has one deadline on the monotonic clock (MaxWait) that
//     bounds rewind waits and sequence-exhaustion waits together, so no call
//     blocks past its budget however the wall clock behaves.
//   - With a Checkpointer, a high-water mark reserved ahead of the issuing
//     tick is persisted before any ID passes it, and a new Generator treats
//     the stored mark as its last tick: a restart in the same millisecond,
//     or after the clock stepped back, never repeats an ID.
//   - A Fence (for example a worker-ID lease) is checked on every call.
//   - An Observer sees rare events (rewinds, waits, exhaustion, refusals,
//     lead changes, checkpoint writes); the fast path never calls it.
//
// The fast path (no rewind, no lead, no checkpoint due) is one clock
// reading and one compare-and-swap, without allocation.
package generator
