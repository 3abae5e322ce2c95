package service_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/node"
	"github.com/snowchaos/snowchaos/server/service"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// open builds a service on the virtual clock v (advanced by the
// generator's waits) with a checkpoint file and the settings s, logging
// to the returned buffer.
func open(t *testing.T, v *faults.Virtual, cp string, s generator.Settings) (*service.Service, *testenv.SyncBuffer) {
	t.Helper()
	var logs testenv.SyncBuffer
	s.Clock = v
	svc, err := service.New(context.Background(), service.Config{
		Node:           node.Config{Settings: s},
		CheckpointPath: cp,
		Log:            slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	return svc, &logs
}

// issue issues n IDs from svc's node.
func issue(t *testing.T, svc *service.Service, n int) []generator.ID {
	t.Helper()
	ids := make([]generator.ID, n)
	if _, err := svc.Node().Issue(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	return ids
}

// TestStartLogFreshStart: a first start writes its own reservation (5 s
// ahead) before it serves, and says nothing about a stored mark: there
// was none, and the node is ready.
func TestStartLogFreshStart(t *testing.T) {
	v := faults.NewVirtual(start, true)
	cp := filepath.Join(t.TempDir(), "mark")
	svc, logs := open(t, v, cp, generator.Settings{Reserve: 5 * time.Second})
	if b, err := os.ReadFile(cp); err != nil || strings.TrimSpace(string(b)) != strconv.FormatInt(start.Add(5*time.Second).UnixMilli(), 10) {
		t.Fatalf("checkpoint holds %q (%v), want the reservation 5s ahead", b, err)
	}
	if strings.Contains(logs.String(), "stored mark") || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a fresh start logged a stored mark:\n%s", logs)
	}
	if m := svc.Node().StartMark(); m.Ms != 0 || m.Holds() {
		t.Fatalf("a fresh start loaded the mark %+v, want none", m)
	}
	if err := svc.Server().Ready(context.Background()); err != nil {
		t.Fatalf("not ready at a fresh start: %v", err)
	}
}

// TestStartLogRestart: after a crash within the reservation (the file
// keeps the reserved mark), a restart logs the mark it loaded, where from
// and how long it holds the node, and its first ID comes after the mark;
// a reservation longer than the wait bound is logged as a warning and the
// node is not ready until the clock passes it. After a graceful stop the
// stored mark is the last ID's, behind the clock at the restart: nothing
// is logged.
func TestStartLogRestart(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reserve  time.Duration
		graceful bool
		logged   string // "" when nothing is logged
		ready    bool
	}{
		{"crash, short reservation", 500 * time.Millisecond, false, "level=INFO msg=\"stored mark: the first IDs wait until the clock passes it\"", true},
		{"crash, long reservation", 5 * time.Second, false, "level=WARN msg=\"stored mark holds the node: no ID, and not ready, until the clock passes it\"", false},
		{"graceful stop", 5 * time.Second, true, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := faults.NewVirtual(start, true)
			cp := filepath.Join(t.TempDir(), "mark")
			s := generator.Settings{Reserve: tc.reserve, MaxWait: time.Second}
			first, _ := open(t, v, cp, s)
			last := issue(t, first, 100)[99]
			if err := first.Node().Stop(context.Background(), tc.graceful); err != nil {
				t.Fatal(err)
			}
			first.Close()
			b, _ := os.ReadFile(cp)
			stored, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			v.Advance(100 * time.Millisecond)

			svc, logs := open(t, v, cp, s)
			m := svc.Node().StartMark()
			if m.Ms != stored || m.Source != node.MarkFromCheckpoint {
				t.Fatalf("loaded %+v, want the stored mark %d from the checkpoint", m, stored)
			}
			if tc.logged == "" {
				if m.Holds() || strings.Contains(logs.String(), "stored mark") {
					t.Fatalf("a restart after a graceful stop (mark %d, %v ahead) logged:\n%s", m.Ms, m.Ahead, logs)
				}
			} else {
				until := time.UnixMilli(stored).UTC().Format(time.RFC3339Nano)
				hold := time.UnixMilli(stored).Sub(start.Add(100 * time.Millisecond))
				for _, want := range []string{tc.logged, "until=" + until, "for=" + hold.String(), "source=\"the checkpoint file " + cp + "\""} {
					if !strings.Contains(logs.String(), want) {
						t.Errorf("the restart's log lacks %q:\n%s", want, logs)
					}
				}
			}
			if err := svc.Server().Ready(context.Background()); (err == nil) != tc.ready {
				t.Fatalf("ready: %v, want ready %v", err, tc.ready)
			}
			if !tc.ready {
				return
			}
			id := issue(t, svc, 1)[0]
			if id <= last || generator.DefaultLayout().Decode(id).Time.UnixMilli() <= stored && !tc.graceful {
				t.Fatalf("first ID after the restart %v (at %v) is not after the stored mark %d and the last ID %v",
					id, generator.DefaultLayout().Decode(id).Time, stored, last)
			}
		})
	}
}
