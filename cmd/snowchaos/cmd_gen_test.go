package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/generator"
)

// fakeClock is a test clock: Sleep advances both readings at once.
type fakeClock struct {
	mu         sync.Mutex
	wall, mono int64
}

func (c *fakeClock) Now() (int64, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall, c.mono
}

func (c *fakeClock) Sleep(d time.Duration) {
	c.mu.Lock()
	c.wall += int64(d)
	c.mono += int64(d)
	c.mu.Unlock()
}

// withClock makes gen use c for the rest of the test.
func withClock(t *testing.T, c generator.Clock) {
	old := genClock
	genClock = func() generator.Clock { return c }
	t.Cleanup(func() { genClock = old })
}

func genRun(ctx context.Context, args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runGen(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func parseLines(t *testing.T, out string) []generator.ID {
	t.Helper()
	var ids []generator.ID
	for _, f := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		id, err := generator.ParseID(f)
		if err != nil {
			t.Fatalf("line %q: %v", f, err)
		}
		ids = append(ids, id)
	}
	return ids
}

func increasing(ids []generator.ID) bool {
	for i := 1; i < len(ids); i++ {
		if ids[i] <= ids[i-1] {
			return false
		}
	}
	return true
}

func TestGen(t *testing.T) {
	code, out, errs := genRun(context.Background(), "-n", "5")
	if code != exitOK || errs != "" {
		t.Fatalf("gen -n 5 = %d, %q", code, errs)
	}
	ids := parseLines(t, out)
	if len(ids) != 5 || !increasing(ids) {
		t.Fatalf("gen -n 5: %v", ids)
	}
}

func TestGenFlags(t *testing.T) {
	c := &fakeClock{wall: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano(), mono: 1}
	withClock(t, c)
	code, out, errs := genRun(context.Background(), "-n", "10000", "--layout", "39/16/8@10ms", "--node", "65535", "--policy", "refuse", "--epoch", "2025-01-01T00:00:00Z")
	if code != exitOK || errs != "" {
		t.Fatalf("gen = %d, %q", code, errs)
	}
	ids := parseLines(t, out)
	l, _ := generator.LayoutByName("39/16/8@10ms")
	if len(ids) != 10000 || !increasing(ids) {
		t.Fatalf("%d IDs, increasing %v", len(ids), increasing(ids))
	}
	for _, id := range ids {
		if p := l.Decode(id); p.Node != 65535 || p.Time.Before(time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)) {
			t.Fatalf("ID %d decodes to %+v", id, p)
		}
	}
}

func TestGenCheckpointRerun(t *testing.T) {
	c := &fakeClock{wall: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano(), mono: 1}
	withClock(t, c)
	path := filepath.Join(t.TempDir(), "mark")
	_, out1, errs := genRun(context.Background(), "-n", "3", "--checkpoint", path)
	if errs != "" {
		t.Fatal(errs)
	}
	// Same clock reading: the rerun waits past the first run's mark.
	code, out2, errs := genRun(context.Background(), "-n", "3", "--checkpoint", path)
	if code != exitOK || errs != "" {
		t.Fatalf("rerun = %d, %q", code, errs)
	}
	all := parseLines(t, out1+out2)
	if !increasing(all) {
		t.Fatalf("rerun repeated or went back: %v", all)
	}
	// With refuse, the rerun in the same millisecond is refused: exit 1.
	code, _, errs = genRun(context.Background(), "-n", "1", "--checkpoint", path, "--policy", "refuse")
	if code != exitFailure || !strings.Contains(errs, "clock moved backwards") {
		t.Errorf("refuse rerun = %d, %q", code, errs)
	}
}

func TestGenCancelled(t *testing.T) {
	c := &fakeClock{wall: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano(), mono: 1}
	withClock(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	code, out, errs := genRun(ctx, "-n", "100000")
	if code != exitFailure || !strings.Contains(errs, "canceled") {
		t.Errorf("cancelled gen = %d, %q", code, errs)
	}
	if n := strings.Count(out, "\n"); n >= 100000 {
		t.Errorf("printed %d IDs after cancel", n)
	}
}

func TestGenBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "0"}, "-n = 0"},
		{[]string{"-n", "-5"}, "-n = -5"},
		{[]string{"-n", "abc"}, "abc"},
		{[]string{"--node", "1024"}, "Node = 1024"},
		{[]string{"--node", "-1"}, "Node = -1"},
		{[]string{"--policy", "yolo"}, `"yolo"`},
		{[]string{"--layout", "nope"}, `"nope"`},
		{[]string{"--epoch", "2100-01-01T00:00:00Z"}, "in the future"},
		{[]string{"--epoch", "soon"}, `"soon"`},
		{[]string{"--max-wait", "0s"}, "--max-wait = 0s"},
		{[]string{"extra"}, `"extra"`},
	} {
		code, out, errs := genRun(context.Background(), tc.args...)
		if code != exitInvalid || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("gen %q = %d, out %q, stderr %q; want exit 2 naming %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	fs := flagSet("x", "x", &bytes.Buffer{})
	b := fs.Bool("b", false, "")
	n := fs.Int("n", 0, "")
	pos, err := parseInterleaved(fs, []string{"1", "-b", "-2", "-n", "-5", "--", "-b", "3"})
	if err != nil || !*b || *n != -5 || strconv.Quote(strings.Join(pos, ",")) != strconv.Quote("1,-2,-b,3") {
		t.Errorf("pos %q, b %v, n %d, err %v", pos, *b, *n, err)
	}
}
