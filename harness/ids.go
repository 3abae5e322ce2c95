package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

// idBuf is one client's buffer for the IDs of a call, in the slice of the
// run's kind of ID (the others stay nil): Snowflakes for every 64-bit
// target, 128-bit IDs or strings for a target.WideNode. A client reuses it
// from call to call, so no kind allocates per call (a string ID is the
// target's allocation, and the verifier copies what it keeps).
type idBuf struct {
	kind verify.Kind
	sf   []generator.ID
	wide []verify.ID128
	strs []string
	n    int // IDs the last call returned
}

// newIDBuf returns a buffer for size IDs of kind.
func newIDBuf(kind verify.Kind, size int) *idBuf {
	b := &idBuf{kind: kind}
	switch {
	case kind == verify.KindSnowflake:
		b.sf = make([]generator.ID, size)
	case kind == verify.KindString:
		b.strs = make([]string, size)
	default:
		b.wide = make([]verify.ID128, size)
	}
	return b
}

// issue asks node for a buffer of IDs; a node that cannot issue the
// run's kind fails every call, saying why.
func (b *idBuf) issue(ctx context.Context, node target.Node) error {
	var err error
	if b.kind == verify.KindSnowflake {
		b.n, err = node.Issue(ctx, b.sf)
		return err
	}
	b.n = 0
	wn, ok := node.(target.WideNode)
	if !ok {
		return fmt.Errorf("%w: the node issues 64-bit Snowflakes only; the scenario's target names %s IDs", target.ErrUnsupported, b.kind)
	}
	if b.kind == verify.KindString {
		b.n, err = wn.IssueStrings(ctx, b.strs)
	} else {
		b.n, err = wn.IssueWide(ctx, b.wide)
	}
	return err
}

// len returns how many IDs the last call returned; 0 for a nil buffer
// (a request that never reached a node).
func (b *idBuf) len() int {
	if b == nil {
		return 0
	}
	return b.n
}

// observe feeds the call o and the buffer's IDs to v, by the kind's path.
func (b *idBuf) observe(v *verify.Verifier, o verify.Observation) verify.Found {
	switch {
	case b.len() == 0:
		return v.Observe(o)
	case b.kind == verify.KindSnowflake:
		o.IDs = b.sf[:b.n]
		return v.Observe(o)
	case b.kind == verify.KindString:
		return v.ObserveStrings(o, b.strs[:b.n])
	}
	return v.ObserveWide(o, b.wide[:b.n])
}

// lastTime returns the time embedded in the last ID, in Unix ns (l is the
// node's layout, for Snowflakes); false when there is none or the kind
// embeds no time.
func (b *idBuf) lastTime(l generator.Layout) (int64, bool) {
	switch {
	case b.len() == 0 || !b.kind.Timed():
		return 0, false
	case b.kind == verify.KindSnowflake:
		return l.Decode(b.sf[b.n-1]).Time.UnixNano(), true
	}
	return b.wide[b.n-1].UnixMilli() * 1e6, true
}

// timeAt returns the start of the tick embedded in ID i, in Unix ns (l is
// the node's layout, for Snowflakes); false when the kind embeds no time.
func (b *idBuf) timeAt(i int, l generator.Layout) (int64, bool) {
	switch {
	case i >= b.len() || !b.kind.Timed():
		return 0, false
	case b.kind == verify.KindSnowflake:
		return l.Decode(b.sf[i]).Time.UnixNano(), true
	}
	return b.wide[i].UnixMilli() * 1e6, true
}

// appendJSON appends the IDs as a JSON array of strings, each in its
// kind's canonical text (decimal for a Snowflake: a JSON number loses
// precision above 2^53).
func (b *idBuf) appendJSON(dst []byte) []byte {
	dst = append(dst, '[')
	for i := range b.len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		switch {
		case b.kind == verify.KindSnowflake:
			dst = append(dst, '"')
			dst = strconv.AppendInt(dst, int64(b.sf[i]), 10)
			dst = append(dst, '"')
		case b.kind == verify.KindString:
			q, _ := json.Marshal(b.strs[i]) // a string always marshals
			dst = append(dst, q...)
		default:
			dst = append(dst, '"')
			dst = append(dst, verify.Value{Kind: b.kind, Bits: b.wide[i]}.String()...)
			dst = append(dst, '"')
		}
	}
	return append(dst, ']')
}
