package generator

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
	"time"
)

// DefaultEpoch is the epoch used when Layout.Epoch is zero:
// 2025-01-01T00:00:00Z.
var DefaultEpoch = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// defaultTick is the tick used when Layout.Tick is zero.
const defaultTick = time.Millisecond

// Layout describes how a 63-bit ID is split into a time field (ticks since
// Epoch), a node field and a sequence field, from high bits to low. The sign
// bit is always 0, so IDs sort the same as signed and unsigned integers.
//
// A zero Epoch means DefaultEpoch and a zero Tick means one millisecond; the
// zero Layout as a whole (no bits set) means DefaultLayout wherever a
// Settings accepts one. Layout is a small value type; its methods do not
// allocate except where they return a time.Time or an error.
type Layout struct {
	// Name is the preset name, informational only (for example "41/10/12").
	Name string
	// TimeBits, NodeBits and SeqBits are the widths of the three fields;
	// they must sum to 63.
	TimeBits, NodeBits, SeqBits uint
	// DatacenterBits, when non-zero, views the high DatacenterBits of the
	// node field as a datacenter and the rest as a worker (5 for
	// "41/5+5/12"). It changes only how Decode reports the node.
	DatacenterBits uint
	// Epoch is the time of tick 0. Zero means DefaultEpoch.
	Epoch time.Time
	// Tick is the unit of the time field. Zero means one millisecond.
	Tick time.Duration
}

// DefaultLayout returns the classic Twitter layout: 41 time bits of 1 ms
// (69 years), 10 node bits, 12 sequence bits (4096 IDs per ms per node),
// counted from DefaultEpoch.
func DefaultLayout() Layout {
	return Layout{Name: "41/10/12", TimeBits: 41, NodeBits: 10, SeqBits: 12, Epoch: DefaultEpoch, Tick: defaultTick}
}

// Presets returns the built-in layouts, default first: "41/10/12",
// "41/5+5/12" (the default with a 5-bit datacenter / 5-bit worker view),
// "42/8/13", "41/12/10", "39/10/14" and "39/16/8@10ms" (Sonyflake's
// layout). Each call returns a fresh slice.
func Presets() []Layout {
	l := func(name string, t, n, s, dc uint, tick time.Duration) Layout {
		return Layout{Name: name, TimeBits: t, NodeBits: n, SeqBits: s, DatacenterBits: dc, Epoch: DefaultEpoch, Tick: tick}
	}
	return []Layout{
		l("41/10/12", 41, 10, 12, 0, time.Millisecond),
		l("41/5+5/12", 41, 10, 12, 5, time.Millisecond),
		l("42/8/13", 42, 8, 13, 0, time.Millisecond),
		l("41/12/10", 41, 12, 10, 0, time.Millisecond),
		l("39/10/14", 39, 10, 14, 0, time.Millisecond),
		l("39/16/8@10ms", 39, 16, 8, 0, 10*time.Millisecond),
	}
}

// LayoutByName returns the preset with the given name (see Presets). The
// aliases "default" ("41/10/12") and "sonyflake" ("39/16/8@10ms") are also
// accepted. An unknown name is an error wrapping ErrInvalidLayout that lists
// the known names.
func LayoutByName(name string) (Layout, error) {
	switch name {
	case "default", "":
		return DefaultLayout(), nil
	case "sonyflake":
		name = "39/16/8@10ms"
	}
	ps := Presets()
	names := make([]string, 0, len(ps))
	for _, p := range ps {
		if p.Name == name {
			return p, nil
		}
		names = append(names, p.Name)
	}
	return Layout{}, fmt.Errorf("%w: unknown layout %q (known: %s)", ErrInvalidLayout, name, strings.Join(names, ", "))
}

// isZero reports whether l sets no bits at all (the "use the default"
// value in Settings).
func (l Layout) isZero() bool {
	return l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 && l.DatacenterBits == 0
}

// Normalize returns l with every default filled in: the zero Layout is
// DefaultLayout(); otherwise a zero Epoch is DefaultEpoch, a zero Tick one
// millisecond and an empty Name the "T/N/S" description. It is the one
// place layout defaults are decided; it does not validate.
func (l Layout) Normalize() Layout {
	if l.isZero() {
		return DefaultLayout()
	}
	if l.Epoch.IsZero() {
		l.Epoch = DefaultEpoch
	}
	if l.Tick == 0 {
		l.Tick = defaultTick
	}
	if l.Name == "" {
		l.Name = l.describe()
	}
	return l
}

// describe renders the layout as "T/N/S", "T/D+W/S" and "@tick" when the
// tick is not 1 ms.
func (l Layout) describe() string {
	s := fmt.Sprintf("%d/%d/%d", l.TimeBits, l.NodeBits, l.SeqBits)
	if l.DatacenterBits > 0 && l.DatacenterBits <= l.NodeBits {
		s = fmt.Sprintf("%d/%d+%d/%d", l.TimeBits, l.DatacenterBits, l.NodeBits-l.DatacenterBits, l.SeqBits)
	}
	if l.Tick != 0 && l.Tick != time.Millisecond {
		s += "@" + l.Tick.String()
	}
	return s
}

// minEpoch and maxEpoch bound the epochs a layout accepts: every tick
// boundary the generator computes must fit in int64 Unix nanoseconds.
var (
	minEpoch = time.Unix(0, 0).UTC()
	maxEpoch = time.Unix(0, math.MaxInt64).UTC()
)

// Validate checks the layout's fields (with Epoch and Tick defaulted when
// zero). Each error names the field and its value and wraps
// ErrInvalidLayout. It does not read a clock; see ValidateAt.
func (l Layout) Validate() error {
	l = l.Normalize()
	switch {
	case l.TimeBits == 0 || l.TimeBits > 63:
		return fmt.Errorf("%w: TimeBits = %d, want 1..63", ErrInvalidLayout, l.TimeBits)
	case l.NodeBits > 62:
		return fmt.Errorf("%w: NodeBits = %d, want 0..62", ErrInvalidLayout, l.NodeBits)
	case l.SeqBits > 62:
		return fmt.Errorf("%w: SeqBits = %d, want 0..62", ErrInvalidLayout, l.SeqBits)
	case l.TimeBits+l.NodeBits+l.SeqBits != 63:
		return fmt.Errorf("%w: TimeBits+NodeBits+SeqBits = %d+%d+%d = %d, want 63",
			ErrInvalidLayout, l.TimeBits, l.NodeBits, l.SeqBits, l.TimeBits+l.NodeBits+l.SeqBits)
	case l.DatacenterBits > l.NodeBits:
		return fmt.Errorf("%w: DatacenterBits = %d exceeds NodeBits = %d", ErrInvalidLayout, l.DatacenterBits, l.NodeBits)
	case l.Tick < 0:
		return fmt.Errorf("%w: Tick = %v, want > 0", ErrInvalidLayout, l.Tick)
	case l.Epoch.Before(minEpoch) || !l.Epoch.Before(maxEpoch):
		return fmt.Errorf("%w: Epoch = %s, want between %s and %s",
			ErrInvalidLayout, l.Epoch.UTC().Format(time.RFC3339Nano), minEpoch.Format(time.RFC3339), maxEpoch.Format(time.RFC3339))
	}
	return nil
}

// ValidateAt is Validate plus the checks that need the current wall time
// (Unix ns): the epoch must not be in the future, and the time field must
// not have overflowed (the layout's lifetime must not be over). The
// lifetime error wraps both ErrInvalidLayout and ErrLifetime.
func (l Layout) ValidateAt(wallNanos int64) error {
	if err := l.Validate(); err != nil {
		return err
	}
	l = l.Normalize()
	if wallNanos < l.Epoch.UnixNano() {
		return fmt.Errorf("%w: Epoch = %s is in the future (now %s)", ErrInvalidLayout,
			l.Epoch.UTC().Format(time.RFC3339Nano), time.Unix(0, wallNanos).UTC().Format(time.RFC3339Nano))
	}
	if t := l.TickOf(wallNanos); t > l.MaxTicks() {
		return fmt.Errorf("%w: %w: tick %d at %s exceeds TimeBits = %d (max %d, lifetime ended %s)",
			ErrInvalidLayout, ErrLifetime, t, time.Unix(0, wallNanos).UTC().Format(time.RFC3339),
			l.TimeBits, l.MaxTicks(), l.TimeOf(l.MaxTicks()+1).Format(time.RFC3339))
	}
	return nil
}

// MaxNode returns the largest node ID the layout holds (2^NodeBits - 1).
func (l Layout) MaxNode() int64 { return int64(1)<<l.NodeBits - 1 }

// MaxSeq returns the largest sequence number per tick (2^SeqBits - 1).
func (l Layout) MaxSeq() int64 { return int64(1)<<l.SeqBits - 1 }

// MaxTicks returns the largest tick the time field holds
// (2^TimeBits - 1); a tick beyond it means the lifetime is over.
func (l Layout) MaxTicks() int64 {
	if l.TimeBits >= 63 {
		return math.MaxInt64
	}
	return int64(1)<<l.TimeBits - 1
}

// TickOf returns the number of whole ticks from the epoch to wallNanos
// (Unix ns), rounded toward minus infinity, so times before the epoch give
// negative ticks. Costs one integer division.
func (l Layout) TickOf(wallNanos int64) int64 {
	l = l.Normalize()
	return floorDiv(wallNanos-l.Epoch.UnixNano(), int64(l.Tick))
}

// TimeOf returns the start of the given tick, in UTC. It never overflows:
// ticks beyond the int64 nanosecond range are computed in 128 bits.
func (l Layout) TimeOf(tick int64) time.Time {
	l = l.Normalize()
	return addTicks(l.Epoch, tick, int64(l.Tick)).UTC()
}

// addTicks returns t + tick*tickNs. The product is computed in 128 bits
// and the result saturates about 35,000 years from t, so it never wraps.
func addTicks(t time.Time, tick, tickNs int64) time.Time {
	neg := tick < 0
	u := uint64(tick)
	if neg {
		u = -u
	}
	hi, lo := bits.Mul64(u, uint64(tickNs))
	// Div64 needs hi < 1e9; beyond that the result saturates anyway.
	secs, nanos := bits.Div64(hi%1e9, lo, 1e9)
	const maxSecs = 1 << 40
	if hi >= 1e9 || secs > maxSecs {
		secs = maxSecs
	}
	if neg {
		return time.Unix(t.Unix()-int64(secs), int64(t.Nanosecond())-int64(nanos))
	}
	return time.Unix(t.Unix()+int64(secs), int64(t.Nanosecond())+int64(nanos))
}

// floorDiv divides rounding toward minus infinity (d > 0).
func floorDiv(n, d int64) int64 {
	q := n / d
	if n%d < 0 {
		q--
	}
	return q
}

// Compose builds the ID for (tick, node, seq). Each argument must fit its
// field: tick in [0, MaxTicks], node in [0, MaxNode] (else ErrNodeRange),
// seq in [0, MaxSeq]; errors name the field and value. Compose and Decode
// are inverse: l.Decode(id) returns the same tick, node and seq.
func (l Layout) Compose(tick, node, seq int64) (ID, error) {
	if err := l.Validate(); err != nil {
		return 0, err
	}
	if tick < 0 || tick > l.MaxTicks() {
		if tick > l.MaxTicks() {
			return 0, fmt.Errorf("%w: tick = %d exceeds the %d-bit time field (max %d)", ErrLifetime, tick, l.TimeBits, l.MaxTicks())
		}
		return 0, fmt.Errorf("%w: tick = %d, want 0..%d", ErrInvalidID, tick, l.MaxTicks())
	}
	if node < 0 || node > l.MaxNode() {
		return 0, fmt.Errorf("%w: node = %d, want 0..%d", ErrNodeRange, node, l.MaxNode())
	}
	if seq < 0 || seq > l.MaxSeq() {
		return 0, fmt.Errorf("%w: sequence = %d, want 0..%d", ErrInvalidID, seq, l.MaxSeq())
	}
	return ID(tick<<(l.NodeBits+l.SeqBits) | node<<l.SeqBits | seq), nil
}

// Parts is an ID split into its fields.
type Parts struct {
	// Tick is the time field: ticks since the layout's epoch.
	Tick int64
	// Time is the start of Tick, in UTC.
	Time time.Time
	// Node is the whole node field.
	Node int64
	// Datacenter and Worker split Node for layouts with DatacenterBits;
	// otherwise Datacenter is 0 and Worker equals Node.
	Datacenter, Worker int64
	// Seq is the sequence field.
	Seq int64
}

// Decode splits id into its fields. It accepts any ID (the sign bit is
// ignored) and never fails; an invalid layout decodes as DefaultLayout's
// bit widths would not, so validate layouts from outside input first.
func (l Layout) Decode(id ID) Parts {
	l = l.Normalize()
	v := uint64(id) &^ (1 << 63)
	var p Parts
	p.Seq = int64(v & uint64(l.MaxSeq()))
	p.Node = int64((v >> l.SeqBits) & uint64(l.MaxNode()))
	if l.NodeBits+l.SeqBits < 64 {
		p.Tick = int64(v >> (l.NodeBits + l.SeqBits))
	}
	wb := l.NodeBits - min(l.DatacenterBits, l.NodeBits)
	if l.DatacenterBits > 0 && l.DatacenterBits <= l.NodeBits {
		p.Datacenter = p.Node >> wb
		p.Worker = p.Node & (int64(1)<<wb - 1)
	} else {
		p.Worker = p.Node
	}
	p.Time = l.TimeOf(p.Tick)
	return p
}
