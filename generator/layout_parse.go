package generator

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Bounds on the tick ParseLayout accepts: finer than a microsecond the
// clock reading itself dominates; coarser than an hour a node issues too
// few IDs to be of use.
const (
	MinParsedTick = time.Microsecond
	MaxParsedTick = time.Hour
)

// ParseLayout returns the layout s names: a preset or alias (see
// LayoutByName), or any split of the 63 bits written "T/N/S" (time, node
// and sequence widths, high to low) or "T/D+W/S" (the node field viewed as
// a datacenter and a worker), optionally followed by "@tick" (a Go
// duration within [MinParsedTick, MaxParsedTick]; default 1ms). Widths may
// be 0 for the node or sequence field: "50/13/0" issues one ID per tick
// per node. The epoch is DefaultEpoch. Every error wraps ErrInvalidLayout
// and names the part of s at fault.
func ParseLayout(s string) (Layout, error) {
	if l, err := LayoutByName(s); err == nil {
		return l, nil
	}
	bitsPart, tickPart, hasTick := strings.Cut(s, "@")
	parts := strings.Split(bitsPart, "/")
	if len(parts) != 3 {
		return Layout{}, fmt.Errorf("%w: %q is neither a preset nor T/N/S[@tick] (time/node/sequence bits summing to 63)", ErrInvalidLayout, s)
	}
	width := func(name, v string) (uint, error) {
		n, err := strconv.ParseUint(strings.TrimSpace(v), 10, 8)
		if err != nil || n > 63 {
			return 0, fmt.Errorf("%w: %s bits %q in %q: want a whole number in 0..63", ErrInvalidLayout, name, v, s)
		}
		return uint(n), nil
	}
	var l Layout
	var err error
	if l.TimeBits, err = width("time", parts[0]); err != nil {
		return Layout{}, err
	}
	if dc, wk, ok := strings.Cut(parts[1], "+"); ok {
		d, err := width("datacenter", dc)
		if err != nil {
			return Layout{}, err
		}
		w, err := width("worker", wk)
		if err != nil {
			return Layout{}, err
		}
		if d == 0 {
			return Layout{}, fmt.Errorf("%w: datacenter bits 0 in %q: write T/N/S for a node field without a datacenter", ErrInvalidLayout, s)
		}
		l.DatacenterBits, l.NodeBits = d, d+w
	} else if l.NodeBits, err = width("node", parts[1]); err != nil {
		return Layout{}, err
	}
	if l.SeqBits, err = width("sequence", parts[2]); err != nil {
		return Layout{}, err
	}
	l.Tick = defaultTick
	if hasTick {
		d, err := time.ParseDuration(strings.TrimSpace(tickPart))
		if err != nil || d < MinParsedTick || d > MaxParsedTick {
			return Layout{}, fmt.Errorf("%w: tick %q in %q: want a duration within [%v, %v]", ErrInvalidLayout, tickPart, s, MinParsedTick, MaxParsedTick)
		}
		l.Tick = d
	}
	l.Epoch = DefaultEpoch
	if err := l.Validate(); err != nil {
		return Layout{}, fmt.Errorf("layout %q: %w", s, err)
	}
	l.Name = l.describe()
	return l, nil
}
