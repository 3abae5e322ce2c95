// Package peers makes popular ID libraries harness targets, so the
// snowchaos harness runs its scenarios against code nobody here wrote.
//
// Each peer is registered with target.Register under its name:
//
//	name          library                                 clock it reads
//	bwmarrin      github.com/bwmarrin/snowflake v0.3.0    wall once at NewNode, then Go's monotonic clock (time.Since(epoch))
//	sonyflake     github.com/sony/sonyflake v1.2.0        wall clock on every call (time.Now().UTC().UnixNano())
//	sonyflake-v2  github.com/sony/sonyflake/v2 v2.2.0     wall clock on every call (time.Now().UTC().UnixNano())
//	uuidv7        github.com/google/uuid v1.6.0 NewV7     wall clock on every call, behind a process-global guard
//	ulid          github.com/oklog/ulid/v2 v2.1.2         whatever time the caller passes (here: the host clock)
//
// A fault reaches a peer only through a hook the peer offers:
//
//   - restart: a new instance, as a process restart would make. The wall
//     clock a new instance reads at start is the host clock: bwmarrin
//     through its Epoch variable (read by NewNode), sonyflake through
//     Settings.StartTime, ulid through the time argument. So a restart
//     after a rewind while down reaches them exactly.
//   - duplicate worker ID (a clone): bwmarrin's node and sonyflake's
//     machine ID. UUIDv7 and ULID have no worker ID.
//   - clock faults while running: only ulid, which takes the time as an
//     argument. bwmarrin reads the monotonic clock, which no wall-clock
//     step moves: the fault cannot reach it in a running process.
//     sonyflake and uuid read the wall clock with no hook to inject a
//     fault: a real NTP step would reach them, this harness cannot.
//
// Faults that cannot reach a peer are not applicable (NotApplicable says
// why); the scenarios under scenarios/peers list a peer as a target only
// where every fault applies, and the survival table prints "n/a" with the
// reason for the rest, never a pass.
//
// Peer IDs reach the harness's verifier as generator.IDs in the node's
// layout (41/10/12 by default): Snowflake-style IDs are re-encoded field
// by field (time, node, sequence), which keeps equality, embedded time and
// per-node order exactly. 128-bit IDs (UUIDv7, ULID) are interned: the
// embedded millisecond becomes the time field and the position of the
// 128-bit value among the distinct values seen in that millisecond fills
// node and sequence, so two IDs map to the same generator.ID exactly when
// the 128-bit values are equal.
package peers
