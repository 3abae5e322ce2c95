package generator

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestPresets(t *testing.T) {
	want := []string{"41/10/12", "41/5+5/12", "42/8/13", "41/12/10", "39/10/14", "39/16/8@10ms"}
	ps := Presets()
	if len(ps) != len(want) {
		t.Fatalf("%d presets, want %d", len(ps), len(want))
	}
	for i, p := range ps {
		if p.Name != want[i] {
			t.Errorf("preset %d = %q, want %q", i, p.Name, want[i])
		}
		if err := p.Validate(); err != nil {
			t.Errorf("%s: %v", p.Name, err)
		}
		if p.describe() != p.Name {
			t.Errorf("%s describes itself as %q", p.Name, p.describe())
		}
		got, err := LayoutByName(p.Name)
		if err != nil || got != p {
			t.Errorf("LayoutByName(%q) = %+v, %v", p.Name, got, err)
		}
	}
	if d := DefaultLayout(); d != ps[0] {
		t.Errorf("DefaultLayout %+v != first preset", d)
	}
	for alias, name := range map[string]string{"default": "41/10/12", "sonyflake": "39/16/8@10ms"} {
		if l, err := LayoutByName(alias); err != nil || l.Name != name {
			t.Errorf("LayoutByName(%q) = %v, %v", alias, l.Name, err)
		}
	}
	_, err := LayoutByName("40/10/13")
	if !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), `"40/10/13"`) || !strings.Contains(err.Error(), "39/16/8@10ms") {
		t.Errorf("unknown name: %v", err)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		l    Layout
		want string // "" means valid
	}{
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12}, ""},
		{Layout{TimeBits: 63}, ""},
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 11}, "41+10+11 = 62, want 63"},
		{Layout{TimeBits: 0, NodeBits: 31, SeqBits: 32}, "TimeBits = 0"},
		{Layout{TimeBits: 64}, "TimeBits = 64"},
		{Layout{TimeBits: 1, NodeBits: 63}, "NodeBits = 63"},
		{Layout{TimeBits: 1, SeqBits: 63}, "SeqBits = 63"},
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, DatacenterBits: 11}, "DatacenterBits = 11 exceeds NodeBits = 10"},
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, Tick: -time.Millisecond}, "Tick = -1ms"},
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, Epoch: time.Date(1969, 12, 31, 0, 0, 0, 0, time.UTC)}, "Epoch = 1969-12-31T00:00:00Z"},
		{Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12, Epoch: time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)}, "Epoch = 2300-01-01T00:00:00Z"},
	} {
		err := tc.l.Validate()
		if tc.want == "" {
			if err != nil {
				t.Errorf("%+v: %v", tc.l, err)
			}
			continue
		}
		if !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want ErrInvalidLayout naming %q", tc.l, err, tc.want)
		}
	}
}

func TestValidateAt(t *testing.T) {
	l := DefaultLayout()
	if err := l.ValidateAt(t0.UnixNano()); err != nil {
		t.Errorf("now: %v", err)
	}
	err := l.ValidateAt(DefaultEpoch.Add(-time.Second).UnixNano())
	if !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), "2025-01-01T00:00:00Z is in the future") {
		t.Errorf("future epoch: %v", err)
	}
	end := l.TimeOf(l.MaxTicks() + 1)
	if end.Year() != 2094 {
		t.Errorf("41-bit ms lifetime ends %v, want 2094", end)
	}
	err = l.ValidateAt(end.UnixNano())
	if !errors.Is(err, ErrLifetime) || !errors.Is(err, ErrInvalidLayout) || !strings.Contains(err.Error(), "TimeBits = 41") {
		t.Errorf("lifetime: %v", err)
	}
	if err := l.ValidateAt(end.UnixNano() - 1); err != nil {
		t.Errorf("last ns of the lifetime: %v", err)
	}
	if err := (Layout{TimeBits: 1, NodeBits: 1}).ValidateAt(0); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("invalid layout: %v", err)
	}
}

func TestMaxima(t *testing.T) {
	l := DefaultLayout()
	if l.MaxNode() != 1023 || l.MaxSeq() != 4095 || l.MaxTicks() != 1<<41-1 {
		t.Errorf("maxima %d %d %d", l.MaxNode(), l.MaxSeq(), l.MaxTicks())
	}
	if (Layout{TimeBits: 63}).MaxTicks() != math.MaxInt64 {
		t.Error("63-bit MaxTicks")
	}
}

func TestTickOfTimeOf(t *testing.T) {
	for _, l := range Presets() {
		e := l.Epoch.UnixNano()
		tick := int64(l.Tick)
		for _, tc := range []struct{ wall, want int64 }{
			{e, 0}, {e + tick - 1, 0}, {e + tick, 1}, {e - 1, -1}, {e - tick, -1}, {e - tick - 1, -2},
		} {
			if got := l.TickOf(tc.wall); got != tc.want {
				t.Errorf("%s: TickOf(epoch%+d) = %d, want %d", l.Name, tc.wall-e, got, tc.want)
			}
		}
		for _, n := range []int64{0, 1, -1, 123456789, l.MaxTicks()} {
			tm := l.TimeOf(n)
			if tm.Location() != time.UTC {
				t.Errorf("TimeOf not UTC")
			}
			if want := l.Epoch.Add(time.Duration(n) * l.Tick); n < 1<<40 && !tm.Equal(want) {
				t.Errorf("%s: TimeOf(%d) = %v, want %v", l.Name, n, tm, want)
			}
			if n < 1<<40 && l.TickOf(tm.UnixNano()) != n {
				t.Errorf("%s: TickOf(TimeOf(%d)) = %d", l.Name, n, l.TickOf(tm.UnixNano()))
			}
		}
	}
	// Huge ticks do not wrap around.
	l := Layout{TimeBits: 63, Tick: time.Hour}
	if y := l.TimeOf(math.MaxInt64).Year(); y < 2025 {
		t.Errorf("TimeOf(MaxInt64) wrapped to year %d", y)
	}
	if y := l.TimeOf(math.MinInt64 + 1).Year(); y > 2025 {
		t.Errorf("TimeOf(MinInt64+1) wrapped to year %d", y)
	}
}

// TestComposeDecodeRoundTrip: for every preset, Compose then Decode returns
// the same fields, and Decode then Compose returns the same ID.
func TestComposeDecodeRoundTrip(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	for _, l := range Presets() {
		edges := func(max int64) []int64 { return []int64{0, 1, max - 1, max, r.Int64N(max + 1)} }
		for i := 0; i < 2000; i++ {
			var tick, node, seq int64
			if i < 125 {
				tick, node, seq = edges(l.MaxTicks())[i%5], edges(l.MaxNode())[i/5%5], edges(l.MaxSeq())[i/25%5]
			} else {
				tick, node, seq = r.Int64N(l.MaxTicks()+1), r.Int64N(l.MaxNode()+1), r.Int64N(l.MaxSeq()+1)
			}
			id, err := l.Compose(tick, node, seq)
			if err != nil {
				t.Fatalf("seed %d: %s: Compose(%d, %d, %d): %v", seed, l.Name, tick, node, seq, err)
			}
			if id < 0 {
				t.Fatalf("seed %d: %s: negative ID %d", seed, l.Name, id)
			}
			p := l.Decode(id)
			if p.Tick != tick || p.Node != node || p.Seq != seq {
				t.Fatalf("seed %d: %s: Decode(Compose(%d, %d, %d)) = %+v", seed, l.Name, tick, node, seq, p)
			}
			if !p.Time.Equal(l.TimeOf(tick)) {
				t.Fatalf("seed %d: %s: Time %v, want %v", seed, l.Name, p.Time, l.TimeOf(tick))
			}
			wb := l.NodeBits - l.DatacenterBits
			if p.Datacenter<<wb|p.Worker != node || (l.DatacenterBits == 0 && p.Worker != node) {
				t.Fatalf("seed %d: %s: node %d split into %d/%d", seed, l.Name, node, p.Datacenter, p.Worker)
			}
			// Decode then Compose of any non-negative ID is the identity.
			v := ID(r.Int64())
			q := l.Decode(v)
			back, err := l.Compose(q.Tick, q.Node, q.Seq)
			if err != nil || back != v {
				t.Fatalf("seed %d: %s: Compose(Decode(%d)) = %d, %v", seed, l.Name, v, back, err)
			}
		}
	}
}

func TestDecodeSplit(t *testing.T) {
	l, _ := LayoutByName("41/5+5/12")
	id, err := l.Compose(1000, 3<<5|17, 99)
	if err != nil {
		t.Fatal(err)
	}
	p := l.Decode(id)
	if p.Datacenter != 3 || p.Worker != 17 || p.Node != 3<<5|17 || p.Seq != 99 || p.Tick != 1000 {
		t.Errorf("split decode %+v", p)
	}
	if !p.Time.Equal(DefaultEpoch.Add(time.Second)) {
		t.Errorf("time %v", p.Time)
	}
}

func TestComposeErrors(t *testing.T) {
	l := DefaultLayout()
	for _, tc := range []struct {
		tick, node, seq int64
		want            error
		text            string
	}{
		{-1, 0, 0, ErrInvalidID, "tick = -1"},
		{1 << 41, 0, 0, ErrLifetime, "tick = 2199023255552"},
		{0, 1024, 0, ErrNodeRange, "node = 1024"},
		{0, -3, 0, ErrNodeRange, "node = -3"},
		{0, 0, 4096, ErrInvalidID, "sequence = 4096"},
		{0, 0, -1, ErrInvalidID, "sequence = -1"},
	} {
		_, err := l.Compose(tc.tick, tc.node, tc.seq)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("Compose(%d, %d, %d) = %v, want %v naming %q", tc.tick, tc.node, tc.seq, err, tc.want, tc.text)
		}
	}
	if _, err := (Layout{TimeBits: 3}).Compose(0, 0, 0); !errors.Is(err, ErrInvalidLayout) {
		t.Errorf("invalid layout: %v", err)
	}
}

func TestZeroLayoutFields(t *testing.T) {
	l := Layout{TimeBits: 41, NodeBits: 10, SeqBits: 12}
	id, _ := l.Compose(5, 1, 2)
	if got := l.Decode(id).Time; !got.Equal(DefaultEpoch.Add(5 * time.Millisecond)) {
		t.Errorf("zero Epoch/Tick: %v", got)
	}
	if n := l.Normalize().Name; n != "41/10/12" {
		t.Errorf("derived name %q", n)
	}
	if n := (Layout{TimeBits: 39, NodeBits: 16, SeqBits: 8, Tick: 10 * time.Millisecond}).Normalize().Name; n != "39/16/8@10ms" {
		t.Errorf("derived name %q", n)
	}
}
