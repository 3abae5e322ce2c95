// Package sinkload makes the load the verification sink's memory tests
// and study send it: bodies of Snowflake ID lines generated as they are
// read (so a 60 MB body costs the sender a few kilobytes), with planted
// duplicates and bad lines whose counts are exact, and a process's memory
// and CPU time read from /proc (Linux).
package sinkload

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// Shape is how IDs fill ticks.
type Shape int

const (
	// Dense is every sequence number of every tick (the layout's ceiling,
	// 4,096 IDs per ms in the default layout), one node after another
	// within a tick, as a batching client receives them.
	Dense Shape = iota
	// Sparse is one ID (sequence 0) per tick per node, the nodes
	// interleaved ID by ID: the worst case for the Verifier's locality.
	Sparse
)

func (s Shape) String() string {
	if s == Sparse {
		return "sparse"
	}
	return "dense"
}

// ParseShape parses "dense" or "sparse".
func ParseShape(s string) (Shape, error) {
	switch s {
	case "dense":
		return Dense, nil
	case "sparse":
		return Sparse, nil
	}
	return 0, fmt.Errorf("sinkload: shape %q: want dense or sparse", s)
}

// Tick0 is the first tick of generated IDs: about 1.5 years after the
// default layout's epoch.
const Tick0 = 47_000_000_000

// Spec describes a body.
type Spec struct {
	// Layout of the IDs (zero: generator.DefaultLayout()).
	Layout generator.Layout
	Shape  Shape
	// Nodes interleaved (at least 1), node fields Node0 on.
	Node0 int64
	Nodes int
	// IDs is how many IDs of the shape the body holds, from its Skip-th
	// on (a long stream sent in several bodies skips the earlier ones).
	IDs, Skip int64
	// Every DupEvery-th ID (0: none) is followed by a planted duplicate:
	// the same ID with node field DupNode (the ID itself when DupNode is
	// its node, else the ID another body of node DupNode sends).
	DupEvery int64
	DupNode  int64
	// Every BadEvery-th ID (0: none) is followed by a bad line, holding
	// a byte 0xbe.
	BadEvery int64
}

// Body reads as the lines of a Spec, generated as they are read. Its
// counts are final once it has been read to io.EOF.
type Body struct {
	spec           Spec
	l              generator.Layout
	perTick, nodes int64
	i              int64 // IDs of the shape written
	node           int64 // the node of the ID at hand
	buf            []byte
	off            int
	// Written counts what the body held: valid ID lines (the planted
	// duplicates among them), bad lines, and bytes.
	IDLines, Dups, Bad, Bytes int64
}

// NewBody returns the body of spec.
func NewBody(spec Spec) (*Body, error) {
	l := spec.Layout
	if l.TimeBits == 0 && l.NodeBits == 0 && l.SeqBits == 0 {
		l = generator.DefaultLayout()
	}
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if spec.Nodes < 1 || spec.IDs < 0 || spec.Skip < 0 || spec.DupEvery < 0 || spec.BadEvery < 0 ||
		spec.Node0 < 0 || spec.Node0+int64(spec.Nodes)-1 > l.MaxNode() || spec.DupNode < 0 || spec.DupNode > l.MaxNode() {
		return nil, fmt.Errorf("sinkload: spec %+v out of bounds for layout %v", spec, l)
	}
	b := &Body{spec: spec, l: l, nodes: int64(spec.Nodes), perTick: 1}
	if spec.Shape == Dense {
		b.perTick = l.MaxSeq() + 1
	}
	return b, nil
}

// ID returns the k-th ID of the shape, counted from 0.
func (b *Body) ID(k int64) generator.ID {
	tick, seq := b.at(k)
	return b.compose(tick, b.node, seq)
}

// at returns the tick and sequence number of the k-th ID, setting b.node
// to its node.
func (b *Body) at(k int64) (tick, seq int64) {
	if b.spec.Shape == Dense {
		perTick := b.perTick * b.nodes
		tick, b.node, seq = k/perTick, k%perTick/b.perTick, k%b.perTick
	} else {
		tick, b.node = k/b.nodes, k%b.nodes
	}
	b.node += b.spec.Node0
	return Tick0 + tick, seq
}

func (b *Body) compose(tick, node, seq int64) generator.ID {
	id, err := b.l.Compose(tick, node, seq)
	if err != nil {
		panic(err) // NewBody checked the bounds
	}
	return id
}

// Read fills p with the next lines.
func (b *Body) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if b.off == len(b.buf) {
			if !b.fill() {
				break
			}
		}
		c := copy(p[n:], b.buf[b.off:])
		b.off += c
		n += c
	}
	b.Bytes += int64(n)
	if n == 0 && len(p) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// fill generates the next few thousand lines into buf; false at the end.
func (b *Body) fill() bool {
	b.buf, b.off = b.buf[:0], 0
	for b.i < b.spec.IDs && len(b.buf) < 32<<10 {
		tick, seq := b.at(b.spec.Skip + b.i)
		id := b.compose(tick, b.node, seq)
		b.i++
		b.buf = strconv.AppendInt(b.buf, int64(id), 10)
		b.buf = append(b.buf, '\n')
		b.IDLines++
		if b.spec.DupEvery > 0 && b.i%b.spec.DupEvery == 0 {
			b.buf = strconv.AppendInt(b.buf, int64(b.compose(tick, b.spec.DupNode, seq)), 10)
			b.buf = append(b.buf, '\n')
			b.IDLines++
			b.Dups++
		}
		if b.spec.BadEvery > 0 && b.i%b.spec.BadEvery == 0 {
			b.buf = append(b.buf, "bad\xbe"...)
			b.buf = strconv.AppendInt(b.buf, b.i, 10)
			b.buf = append(b.buf, '\n')
			b.Bad++
		}
	}
	return len(b.buf) > 0
}

// Mem is a process's resident memory, from /proc/PID/status.
type Mem struct {
	// RSS is VmRSS, HWM VmHWM (the peak RSS), in bytes.
	RSS, HWM uint64
}

// ReadMem reads pid's memory (pid 0: this process).
func ReadMem(pid int) (Mem, error) {
	path := "/proc/self/status"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/status"
	}
	f, err := os.Open(path)
	if err != nil {
		return Mem{}, err
	}
	defer f.Close()
	var m Mem
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != "VmRSS" && k != "VmHWM" {
			continue
		}
		f := strings.Fields(v)
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil || len(f) != 2 || f[1] != "kB" {
			return Mem{}, fmt.Errorf("sinkload: %s: %s is %q", path, k, v)
		}
		if k == "VmRSS" {
			m.RSS = kb << 10
		} else {
			m.HWM = kb << 10
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return Mem{}, err
	}
	if found != 2 {
		return Mem{}, fmt.Errorf("sinkload: %s has no VmRSS and VmHWM", path)
	}
	return m, nil
}

// LoadAverage returns the 1, 5 and 15 minute load averages from
// /proc/loadavg, as there ("?" when unreadable).
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// userHZ is the unit of /proc/PID/stat's times: USER_HZ, 100 on every
// Linux architecture Go supports.
const userHZ = 100

// ReadCPU reads the CPU time pid has used, user and system, all its
// threads (pid 0: this process), in 10 ms steps.
func ReadCPU(pid int) (time.Duration, error) {
	path := "/proc/self/stat"
	if pid > 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/stat"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	// The command name, in parentheses, may hold spaces: fields count
	// from its closing parenthesis, utime and stime being 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("sinkload: " + path + " has no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("sinkload: " + path + " is short")
	}
	var ticks uint64
	for _, s := range f[11:13] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("sinkload: %s: %w", path, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}
