package sinkload

import (
	"bytes"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/snowchaos/snowchaos/generator"
	"github.com/snowchaos/snowchaos/internal/testenv"
	"github.com/snowchaos/snowchaos/verify/sink"
)

// TestBodyCounts: a body's lines, read through the sink, are exactly the
// counts the body reports, in both shapes; the k-th ID is as documented.
func TestBodyCounts(t *testing.T) {
	l := generator.DefaultLayout()
	for _, sh := range []Shape{Dense, Sparse} {
		s, err := sink.New(sink.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// Two bodies of nodes 3..4, each planting the other's IDs.
		a, _ := NewBody(Spec{Shape: sh, Node0: 3, Nodes: 2, IDs: 10_000, DupEvery: 97, DupNode: 5, BadEvery: 1000})
		b, _ := NewBody(Spec{Shape: sh, Node0: 5, Nodes: 1, IDs: 5_000})
		seen, dups := map[string]bool{}, 0 // the reference: repeated lines that are IDs
		for _, body := range []*Body{a, b} {
			var tee bytes.Buffer
			res, err := s.IngestFrom(iotest.OneByteReader(io.TeeReader(body, &tee)), sink.Source{})
			if err != nil || int64(res.IDs) != body.IDLines || int64(res.BadLines) != body.Bad {
				t.Fatalf("%s: %+v %v, body %+v", sh, res, err, body)
			}
			for _, line := range strings.Split(strings.TrimSpace(tee.String()), "\n") {
				if _, err := generator.ParseID(line); err == nil {
					if seen[line] {
						dups++
					}
					seen[line] = true
				}
			}
		}
		tot := s.Totals()
		if tot.IDs != uint64(a.IDLines+b.IDLines) || a.Dups != 10_000/97 || a.Bad != 10 || tot.Duplicates != uint64(dups) || dups == 0 {
			t.Fatalf("%s: %+v, a %+v, reference duplicates %d", sh, tot, a, dups)
		}
		p := l.Decode(a.ID(4096 + 3))
		switch sh {
		case Dense: // node 3's 4,096, then node 4's: the 4,100th is node 4, tick 0, seq 3
			if p.Tick != Tick0 || p.Node != 4 || p.Seq != 3 {
				t.Fatalf("dense ID %+v", p)
			}
		case Sparse: // two IDs a tick
			if p.Tick != Tick0+2049 || p.Node != 4 || p.Seq != 0 {
				t.Fatalf("sparse ID %+v", p)
			}
		}
	}
	var buf bytes.Buffer
	body, _ := NewBody(Spec{Nodes: 1, IDs: 3})
	io.Copy(&buf, body)
	if buf.Len() != int(body.Bytes) || bytes.Count(buf.Bytes(), []byte{'\n'}) != 3 {
		t.Fatalf("%q, %+v", buf.String(), body)
	}
	if _, err := NewBody(Spec{Nodes: 0}); err == nil {
		t.Fatal("no nodes accepted")
	}
}

func TestReadProc(t *testing.T) {
	m, err := ReadMem(0)
	if err != nil || m.RSS == 0 || m.HWM < m.RSS {
		t.Fatalf("%+v %v", m, err)
	}
	if l := strings.Fields(LoadAverage()); len(l) != 3 {
		t.Fatalf("load average %q", LoadAverage())
	}
	c0, err := ReadCPU(0)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the kernel has charged this process another tick.
	x := 0
	if !testenv.Eventually(t.Context(), time.Minute, func() bool {
		for i := range 1_000_000 {
			x += i
		}
		c, err := ReadCPU(0)
		return err == nil && c > c0
	}) {
		t.Fatalf("no CPU time charged after a minute of spinning (%d)", x)
	}
}
