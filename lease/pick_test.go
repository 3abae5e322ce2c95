package lease_test

import (
	"testing"

	"github.com/snowchaos/snowchaos/lease"
)

func TestRequestPick(t *testing.T) {
	live := lease.Slot{Live: true, Used: true, Holder: "x"}
	mark := func(holder string, seq int64) lease.Slot { return lease.Slot{Used: true, Holder: holder, Seq: seq} }
	for _, tc := range []struct {
		name   string
		rng    lease.Range
		prefer []int64
		slots  map[int64]lease.Slot
		want   int64
	}{
		{"empty store: the lowest", lease.Range{Min: 3, Max: 5}, nil, nil, 3},
		{"live ones skipped", lease.Range{Min: 0, Max: 2}, nil, map[int64]lease.Slot{0: live, 1: live}, 2},
		{"all live", lease.Range{Min: 0, Max: 1}, []int64{1}, map[int64]lease.Slot{0: live, 1: live}, -1},
		{"own before fresh", lease.Range{Min: 0, Max: 2}, nil, map[int64]lease.Slot{2: mark("me", 5)}, 2},
		{"newest own wins", lease.Range{Min: 0, Max: 3}, nil, map[int64]lease.Slot{0: mark("me", 5), 1: mark("me", 9), 2: mark("me", 7)}, 1},
		{"own live is not taken over", lease.Range{Min: 0, Max: 1}, nil, map[int64]lease.Slot{0: {Live: true, Used: true, Holder: "me"}}, 1},
		{"prefer before fresh", lease.Range{Min: 0, Max: 4}, []int64{9, 1, 3}, map[int64]lease.Slot{1: live}, 3},
		{"own before prefer", lease.Range{Min: 0, Max: 4}, []int64{3}, map[int64]lease.Slot{4: mark("me", 1)}, 4},
		{"fresh before expired", lease.Range{Min: 0, Max: 2}, nil, map[int64]lease.Slot{0: mark("a", 1), 1: mark("b", 2)}, 2},
		{"longest expired last", lease.Range{Min: 0, Max: 2}, nil, map[int64]lease.Slot{0: mark("a", 8), 1: mark("b", 2), 2: mark("c", 4)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := lease.Request{Holder: "me", Range: tc.rng, Prefer: tc.prefer}
			got := req.Pick(func(id int64) lease.Slot {
				if !tc.rng.Contains(id) {
					t.Fatalf("slot(%d) outside %v", id, tc.rng)
				}
				return tc.slots[id]
			})
			if got != tc.want {
				t.Fatalf("Pick = %d, want %d", got, tc.want)
			}
		})
	}
}
