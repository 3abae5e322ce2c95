package sink

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/telemetry/promtest"
	"github.com/snowchaos/snowchaos/verify"
)

var dl = generator.DefaultLayout()

func sf(tick, node, seq int64) string {
	id, err := dl.Compose(tick, node, seq)
	if err != nil {
		panic(err)
	}
	return id.String()
}

// clock is a manual reference clock.
type clock struct{ ns int64 }

func (c *clock) now() int64 { return c.ns }

func newSink(t *testing.T, cfg Config) *Sink {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestIngestMixedLines(t *testing.T) {
	s := newSink(t, Config{})
	body := strings.Join([]string{sf(100, 1, 0), "oops", `["` + sf(100, 1, 1) + `","` + sf(100, 1, 2) + `"]`, "", sf(100, 1, 0), `{"id":"x"}`}, "\n")
	res, err := s.Ingest([]byte(body), Source{Request: true})
	if err != nil {
		t.Fatal(err)
	}
	// The valid lines are verified, including the repeat on line 5; the
	// two bad ones are counted and named.
	if res.IDs != 4 || res.Duplicates != 1 || res.BadLines != 2 || len(res.Errors) != 2 {
		t.Fatalf("%+v", res)
	}
	if e := res.Errors[0]; e.Batch != 1 || e.Line != 2 || e.Value != "oops" || !strings.Contains(e.Error(), "batch 1, line 2") {
		t.Fatalf("first error %+v: %v", e, e.Error())
	}
	if e := res.Errors[1]; e.Line != 6 || !errors.Is(&e, verify.ErrInvalidID) {
		t.Fatalf("second error %+v", e)
	}
	tot := s.Totals()
	if tot.IDs != 4 || tot.Duplicates != 1 || tot.BadLines != 2 || tot.Batches != 1 || tot.ExitCode(0) != ExitFinding {
		t.Fatalf("totals %+v", tot)
	}
	r := s.Report()
	if len(r.Errors) != 2 || r.Result.Duplicates != 1 || r.Result.DuplicateDetails[0].ID.String() != sf(100, 1, 0) {
		t.Fatalf("report %+v", r)
	}
}

func TestIngestIssuersAndStreams(t *testing.T) {
	c := &clock{ns: dl.Epoch.UnixNano() + 1000*int64(time.Millisecond)}
	s := newSink(t, Config{Now: c.now})
	// Two nodes in one body: issuers node-1 and node-2 from the node field.
	body := sf(1000, 1, 0) + "\n" + sf(1000, 2, 0) + "\n" + sf(1000, 1, 1) + "\n"
	if res, err := s.Ingest([]byte(body), Source{Labels: Labels{Stream: "conn-1"}}); err != nil || res.IDs != 3 || res.OrderViolations != 1 {
		// node-2's ID at tick 1000 is above node-1's seq 0, and node-1's seq 1
		// is below it: the stream (one connection) went backwards.
		t.Fatalf("%+v %v", res, err)
	}
	// A clone of node 1 (another connection) repeats an ID: a duplicate
	// between node-1 and itself, as the sink sees issuers by node field.
	res, _ := s.Ingest([]byte(sf(1000, 1, 1)), Source{Labels: Labels{Stream: "conn-2"}})
	if res.Duplicates != 1 || res.OrderViolations != 0 {
		t.Fatalf("%+v", res)
	}
	// Named issuers: a restart that repeats its predecessor's range.
	s.Ingest([]byte(sf(2000, 5, 0)+"\n"+sf(2001, 5, 0)), Source{Labels: Labels{Issuer: "js", Incarnation: 0}})
	res, _ = s.Ingest([]byte(sf(2000, 5, 7)), Source{Labels: Labels{Issuer: "js", Incarnation: 1}})
	if res.RestartViolations != 1 {
		t.Fatalf("restart: %+v", res)
	}
	r := s.Report().Result
	lead := map[string]time.Duration{}
	for _, is := range r.Issuers {
		lead[is.Name] = is.MaxLead
	}
	if len(lead) != 3 || r.Streams != 2 {
		t.Fatalf("issuers %v streams %d", lead, r.Streams)
	}
	// Against the reference time of receipt (1000 ms), the nodes' IDs are
	// in step and js's (tick 2000) a second ahead.
	if lead["node-1"] != 0 || lead["node-2"] != 0 || lead["js"] != time.Second || r.Lag.Max != 0 {
		t.Fatalf("lead %v lag %v", lead, r.Lag)
	}
	// Labels are bounded.
	if _, err := s.Ingest(nil, Source{Labels: Labels{Stream: strings.Repeat("s", maxLabel+1)}}); err == nil {
		t.Fatal("long stream label accepted")
	}
	small := newSink(t, Config{MaxStreams: 1})
	small.Ingest([]byte("1"), Source{Labels: Labels{Stream: "a"}})
	if _, err := small.Ingest([]byte("2"), Source{Labels: Labels{Stream: "b"}}); err == nil || small.Totals().IDs != 1 {
		t.Fatalf("second stream beyond MaxStreams: %v, totals %+v", err, small.Totals())
	}
}

func TestIngestKinds(t *testing.T) {
	u := "017f22e2-79b0-7cc3-98c4-dc0c0c07398f"
	for _, c := range []struct {
		kind verify.Kind
		body string
		dups int
	}{
		{verify.KindUUIDv7, u + "\n" + strings.ToUpper(u) + "\n", 1},
		{verify.KindUUIDv4, "5e6a1d0c-8f3b-4c2a-9d1e-0a1b2c3d4e5f\n5e6a1d0c8f3b4c2a9d1e0a1b2c3d4e5f\n", 1},
		{verify.KindULID, "01ARZ3NDEKTSV4RRFFQ69G5FAV\n01arz3ndektsv4rrffq69g5fav\n", 1},
		{verify.KindString, "order-1\norder-2\n\"order-1\"\n", 1},
	} {
		s := newSink(t, Config{Kind: c.kind})
		res, err := s.Ingest([]byte(c.body), Source{})
		if err != nil || res.Duplicates != c.dups || res.BadLines != 0 {
			t.Errorf("%s: %+v %v", c.kind, res, err)
		}
	}
}

func TestConsume(t *testing.T) {
	s := newSink(t, Config{MaxLineBytes: 64})
	var in strings.Builder
	for i := range 500 {
		fmt.Fprintf(&in, "%s\n", sf(int64(5000+i), 3, 0))
	}
	in.WriteString("bad\n")
	in.WriteString(strings.Repeat("9", 200) + "\n") // over MaxLineBytes
	in.WriteString(sf(5000, 3, 0))                  // a repeat, without a final newline
	// One byte per read: batches cut at every read, lines numbered across.
	lines, err := s.Consume(iotest.OneByteReader(strings.NewReader(in.String())), Labels{Stream: "stdin"})
	if err != nil || lines != 503 {
		t.Fatalf("lines %d, %v", lines, err)
	}
	r := s.Report()
	if r.IDs != 501 || r.Duplicates != 1 || r.BadLines != 2 || r.Result.OrderViolations != 1 {
		t.Fatalf("%+v", r.Totals)
	}
	if len(r.Errors) != 2 || r.Errors[0].Line != 501 || r.Errors[1].Line != 502 || !strings.Contains(r.Errors[1].Error(), "longer than 64 bytes") ||
		r.Errors[0].Batch != 0 || !strings.HasPrefix(r.Errors[0].Error(), "sink: line 501:") {
		t.Fatalf("errors %+v", r.Errors)
	}
	// A read error is reported with the line it stopped at.
	s2 := newSink(t, Config{})
	_, err = s2.Consume(io.MultiReader(strings.NewReader("1\n2\n"), iotest.ErrReader(errors.New("boom"))), Labels{})
	if err == nil || !strings.Contains(err.Error(), "boom") || s2.Totals().IDs != 2 {
		t.Fatalf("%v %+v", err, s2.Totals())
	}
}

func TestExitCode(t *testing.T) {
	for _, c := range []struct {
		t      Totals
		expect uint64
		want   int
	}{
		{Totals{IDs: 10}, 10, ExitOK},
		{Totals{IDs: 10}, 0, ExitOK},
		{Totals{}, 1, ExitInvalid}, // nothing arrived
		{Totals{IDs: 9}, 10, ExitInvalid},
		{Totals{IDs: 10, BadLines: 1}, 10, ExitInvalid},
		{Totals{IDs: 10, Duplicates: 1, BadLines: 1}, 10, ExitFinding},
		{Totals{IDs: 1, OrderViolations: 1}, 10, ExitFinding},
		{Totals{IDs: 10, RestartViolations: 1}, 0, ExitFinding},
	} {
		if got := c.t.ExitCode(c.expect); got != c.want {
			t.Errorf("%+v expect %d: %d, want %d", c.t, c.expect, got, c.want)
		}
	}
}

func TestHTTP(t *testing.T) {
	s := newSink(t, Config{})
	stopped := make(chan struct{})
	var once sync.Once
	h, err := s.Handler(HTTPConfig{MaxBody: 1 << 10}, func() { once.Do(func() { close(stopped) }) })
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	post := func(q, body string) (int, map[string]any) {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/ids"+q, "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
			t.Fatalf("%s: answer not JSON: %v", q, err)
		}
		return resp.StatusCode, m
	}
	if code, m := post("?stream=c1", sf(9, 1, 0)+"\n"+sf(9, 1, 1)+"\n"); code != 200 || m["ids"] != 2.0 || m["batch"] != 1.0 {
		t.Fatalf("%d %v", code, m)
	}
	code, m := post("", sf(9, 1, 1)+"\nnope\n")
	if code != 400 || m["line"] != 2.0 || m["value"] != "nope" || m["ids"] != 1.0 || m["duplicates"] != 1.0 ||
		!strings.Contains(m["error"].(string), "batch 2, line 2") {
		t.Fatalf("%d %v", code, m)
	}
	for q, want := range map[string]string{"?colour=red": "unknown query parameter", "?stream=a&stream=b": "2 times",
		"?issuer=x&incarnation=-1": "incarnation", "?incarnation=2": "without an issuer", "?%zz": "bad query"} {
		if code, m := post(q, "1"); code != 400 || !strings.Contains(m["error"].(string), want) {
			t.Errorf("%s: %d %v, want %q", q, code, m, want)
		}
	}
	if code, m := post("", strings.Repeat("1\n", 600)); code != 413 || !strings.Contains(m["error"].(string), "nothing verified") {
		t.Fatalf("oversized: %d %v", code, m)
	}
	resp, err := http.Get(srv.URL + "/v1/totals")
	if err != nil {
		t.Fatal(err)
	}
	var tot map[string]uint64
	json.NewDecoder(resp.Body).Decode(&tot)
	resp.Body.Close()
	if tot["ids"] != 3 || tot["duplicates"] != 1 || tot["bad_lines"] != 1 || tot["batches"] != 2 {
		t.Fatalf("totals %v", tot)
	}
	if resp, err := http.Get(srv.URL + "/v1/ids"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /v1/ids: %v %v", resp, err)
	}
	for _, path := range []string{"/v1/totals", "/healthz"} { // HEAD wherever GET works
		if resp, err := http.Head(srv.URL + path); err != nil || resp.StatusCode != 200 {
			t.Fatalf("HEAD %s: %v %v", path, resp, err)
		}
	}
	if resp, err := http.Post(srv.URL+"/v1/stop", "", nil); err != nil || resp.StatusCode != 200 {
		t.Fatal(err)
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("stop not called")
	}
}

func TestMetrics(t *testing.T) {
	s := newSink(t, Config{Kind: verify.KindULID})
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(s.Collector())
	s.Ingest([]byte("01ARZ3NDEKTSV4RRFFQ69G5FAV\n01ARZ3NDEKTSV4RRFFQ69G5FAV\nbad\n"), Source{})
	got := promtest.Samples(t, reg)
	want := map[string]float64{
		"snowchaos_verify_ids_total{ulid}": 2, "snowchaos_verify_duplicates_total{ulid}": 1,
		"snowchaos_verify_parse_errors_total{ulid}": 1, "snowchaos_verify_batches_total{ulid}": 1,
		"snowchaos_verify_order_violations_total{ulid}": 0, "snowchaos_verify_restart_violations_total{ulid}": 0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

func TestNewBounds(t *testing.T) {
	for _, cfg := range []Config{{MaxLineBytes: -1}, {MaxStreams: -2}, {Kind: 99}, {Layout: generator.Layout{TimeBits: 40, NodeBits: 10, SeqBits: 10}}} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}

// TestConcurrentIngest: batches from many goroutines are all verified.
func TestConcurrentIngest(t *testing.T) {
	s := newSink(t, Config{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				var b bytes.Buffer
				for j := range 10 {
					b.WriteString(sf(int64(10000+i), int64(g), int64(j)) + "\n")
				}
				s.Ingest(b.Bytes(), Source{Labels: Labels{Stream: fmt.Sprint("c", g)}})
			}
		})
	}
	wg.Wait()
	if tot := s.Totals(); tot.IDs != 8*50*10 || tot.Duplicates+tot.OrderViolations != 0 || tot.Batches != 400 {
		t.Fatalf("%+v", tot)
	}
}

// pieces reads data in pieces of the sizes seed draws (1 to 64 bytes),
// then fails with fail when it is non-nil (after failAt bytes), else ends.
type pieces struct {
	data   []byte
	rng    *rand.Rand
	failAt int
	fail   error
}

func (p *pieces) Read(b []byte) (int, error) {
	limit := len(p.data)
	if p.fail != nil {
		limit = p.failAt
	}
	if limit == 0 {
		if p.fail != nil {
			return 0, p.fail
		}
		return 0, io.EOF
	}
	n := min(len(b), limit, 1+p.rng.IntN(64))
	copy(b, p.data[:n])
	p.data, p.failAt = p.data[n:], p.failAt-n
	if p.fail == nil {
		p.failAt = 0
	}
	return n, nil
}

// refBody is the dumb reference for a body: its lines split at '\n' (the
// last only when not empty), each parsed alone; a duplicate is an ID's
// canonical text seen before.
func refBody(kind verify.Kind, body []byte, maxLine int) (ids, bad, dups int) {
	lines := bytes.Split(body, []byte{'\n'})
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	seen := map[string]bool{}
	for i, l := range lines {
		var got IDs
		if len(l) > maxLine || NewParser(kind).Line(l, i+1, &got) != nil {
			bad++
			continue
		}
		for _, x := range texts(kind, &got) {
			if seen[x] {
				dups++
			}
			seen[x] = true
			ids++
		}
	}
	return ids, bad, dups
}

// FuzzIngestStream: a body read in random pieces through a 16-byte buffer
// (so lines longer than the buffer take the gathering path) gives exactly
// the counts of its lines parsed one by one; cut off part way, it counts
// exactly its lines before the cut and names the cut's line and byte.
func FuzzIngestStream(f *testing.F) {
	f.Add([]byte("1\n2\n2\nx\n"+strings.Repeat("7", 50)+"\n[3,4]\n"), uint64(1), uint8(0), uint16(5))
	f.Add([]byte("order-1\n\"order-1\"\n\xbe\n"+strings.Repeat("a", 40)+"\n"), uint64(2), uint8(verify.KindString), uint16(0))
	f.Add([]byte(`["01ARZ3NDEKTSV4RRFFQ69G5FAV","01ARZ3NDEKTSV4RRFFQ69G5FAV"]`), uint64(3), uint8(verify.KindULID), uint16(30))
	f.Fuzz(func(t *testing.T, body []byte, seed uint64, k uint8, cut uint16) {
		const maxLine = 40
		kind := verify.Kinds()[int(k)%len(verify.Kinds())]
		s := newSink(t, Config{Kind: kind, MaxLineBytes: maxLine})
		s.bufSize = 16
		rng := rand.New(rand.NewPCG(seed, 7))
		whole := body
		var fail error
		if cut > 0 && int(cut) <= len(body) {
			fail = errors.New("cut")
			whole = body[:cut]
			if i := bytes.LastIndexByte(whole, '\n'); i >= 0 {
				whole = whole[:i+1] // only the lines that arrived whole
			} else {
				whole = nil
			}
		}
		res, err := s.IngestFrom(&pieces{data: body, rng: rng, failAt: int(cut), fail: fail}, Source{Request: true})
		ids, bad, dups := refBody(kind, whole, maxLine)
		if res.IDs != ids || res.BadLines != bad || res.Duplicates != dups {
			t.Fatalf("%s %q cut %d: ids %d bad %d dups %d, reference %d %d %d", kind, body, cut, res.IDs, res.BadLines, res.Duplicates, ids, bad, dups)
		}
		tot := s.Totals()
		if tot.IDs != uint64(ids) || tot.BadLines != uint64(bad) || tot.Duplicates != uint64(dups) {
			t.Fatalf("totals %+v, reference %d %d %d", tot, ids, bad, dups)
		}
		if fail == nil {
			if err != nil || tot.Incomplete != 0 {
				t.Fatalf("%q: %v, incomplete %d", body, err, tot.Incomplete)
			}
			return
		}
		var ie *IncompleteError
		wantLine := bytes.Count(whole, []byte{'\n'}) + 1
		if !errors.As(err, &ie) || !errors.Is(err, fail) || ie.Line != wantLine || ie.Byte != int64(cut) || ie.Batch != 1 || tot.Incomplete != 1 {
			t.Fatalf("%q cut at %d: %v (%+v), want line %d byte %d", body, cut, err, ie, wantLine, cut)
		}
	})
}

// TestIngestStopsExactly: a body cut off mid-line reports exactly what was
// verified and names the line and byte where it stopped; a batch that
// would pass MaxIssuers stops before its chunk, verifying none of it.
func TestIngestStopsExactly(t *testing.T) {
	s := newSink(t, Config{})
	body := sf(9, 1, 0) + "\n" + sf(9, 1, 0) + "\nbad\n" + sf(9, 1, 1)[:5] // the fourth line is cut
	res, err := s.IngestFrom(io.MultiReader(strings.NewReader(body), iotest.ErrReader(io.ErrUnexpectedEOF)), Source{Request: true})
	var ie *IncompleteError
	if !errors.As(err, &ie) || ie.Line != 4 || ie.Byte != int64(len(body)) || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("%v", err)
	}
	want := fmt.Sprintf("sink: batch 1: stopped at line 4, byte %d: unexpected EOF; lines 1 to 3 were verified, line 4 and after were not", len(body))
	if err.Error() != want || res.IDs != 2 || res.Duplicates != 1 || res.BadLines != 1 {
		t.Fatalf("%v\nwant %s\n%+v", err, want, res)
	}
	r := s.Report()
	if r.Incomplete != 1 || len(r.IncompleteErrors) != 1 || r.ExitCode(0) != ExitFinding {
		t.Fatalf("%+v", r.Totals)
	}
	clean := newSink(t, Config{})
	clean.IngestFrom(io.MultiReader(strings.NewReader("5\n"), iotest.ErrReader(io.ErrUnexpectedEOF)), Source{})
	if tot := clean.Totals(); tot.IDs != 1 || tot.Incomplete != 1 || tot.ExitCode(0) != ExitInvalid {
		t.Fatalf("an incomplete batch must make the run invalid: %+v", tot)
	}

	// Two issuers at most: node-1, then a chunk with nodes 2 and 3.
	small := newSink(t, Config{MaxIssuers: 2})
	small.Ingest([]byte(sf(9, 1, 0)), Source{})
	res, err = small.Ingest([]byte(sf(9, 2, 0)+"\n"+sf(9, 3, 0)+"\n"), Source{})
	if !errors.As(err, &ie) || ie.Line != 1 || ie.Byte != 0 || res.IDs != 0 || small.Totals().IDs != 1 {
		t.Fatalf("%v %+v %+v", err, res, small.Totals())
	}
}
