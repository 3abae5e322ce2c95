package ntpcheck

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/beevik/ntp"

	"github.com/snowchaos/snowchaos/ntpcheck/chronytest"
)

var (
	record = flag.Bool("record", false, "query chronyd and fake servers and rewrite testdata/responses")
	update = flag.Bool("update", false, "rewrite golden files under testdata/golden")
)

// leapDay is a real leap-second day: 23:59:60 UTC followed it.
var leapDay = time.Date(2016, 12, 31, 12, 0, 0, 0, time.UTC)

// TestRecordResponses rewrites the recorded responses the unit tests
// replay. Run: go test ./ntpcheck -run TestRecordResponses -record
func TestRecordResponses(t *testing.T) {
	if !*record {
		t.Skip("run with -record to rewrite testdata/responses")
	}
	shift := time.Until(leapDay)
	onLeapDay := func() time.Time { return time.Now().Add(shift) }
	sources := []struct {
		name  string
		addr  func() string
		local func() time.Time
	}{
		{"chrony-local-stratum8", func() string { return chronytest.Start(t, chronytest.Options{}).Addr }, nil},
		{"chrony-unsynchronised", func() string { return chronytest.Start(t, chronytest.Options{NoLocal: true}).Addr }, nil},
		{"fake-kod-rate", func() string { return chronytest.StartFake(t, chronytest.Fake{KissCode: "RATE"}) }, nil},
		{"fake-stratum1-gps", func() string {
			return chronytest.StartFake(t, chronytest.Fake{Stratum: 1, RefID: 0x47505300, RootDispersion: 500 * time.Microsecond})
		}, nil},
		{"fake-leap-insert-2016-12-31", func() string {
			return chronytest.StartFake(t, chronytest.Fake{Leap: 1, Now: onLeapDay})
		}, onLeapDay},
		{"fake-leap-delete-2016-12-31", func() string {
			return chronytest.StartFake(t, chronytest.Fake{Leap: 2, Now: onLeapDay})
		}, onLeapDay},
	}
	for _, s := range sources {
		addr := s.addr()
		resp, err := queryOnce(context.Background(), addr, 2*time.Second, s.local)
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		b, err := json.MarshalIndent(resp, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("testdata", "responses", s.name+".json"), append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadResponse reads a recorded response.
func loadResponse(t *testing.T, name string) *ntp.Response {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "responses", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var r ntp.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return &r
}
