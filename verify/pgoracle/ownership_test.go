package pgoracle

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/snowchaos/snowchaos/generator"
)

// lateCopier fails every COPY at once while its copy goroutine reads the
// stream only after release is closed: what pgx's CopyFrom does when the
// server ends the connection mid-COPY (it returns without waiting for the
// goroutine that reads the io.Reader).
type lateCopier struct {
	release chan struct{}
	got     chan []byte
}

func (l *lateCopier) CopyFrom(_ context.Context, r io.Reader, _ string) (pgconn.CommandTag, error) {
	go func() {
		<-l.release
		b, _ := io.ReadAll(r)
		l.got <- b
	}()
	return pgconn.CommandTag{}, errors.New("FATAL: terminating connection due to administrator command (SQLSTATE 57P01)")
}

// TestFailedCopyKeepsItsBuffer pins the ownership rule: the buffer of a
// COPY that failed is never reused, because pgx may still be reading it.
// More batches are added after the failure (each is dropped and freed, so
// a reused buffer would be overwritten); the late reader must still see
// exactly the first batch's rows.
func TestFailedCopyKeepsItsBuffer(t *testing.T) {
	const per = 10
	o := newOracle(Config{BatchSize: per, QueueDepth: 2, Writers: 1, MaxDetails: 1, Clock: generator.SystemClock(), Table: "unused"})
	lc := &lateCopier{release: make(chan struct{}), got: make(chan []byte, 1)}
	o.start(lc)
	ids := func(from int) []generator.ID {
		out := make([]generator.ID, per)
		for i := range out {
			out[i] = generator.ID(from + i)
		}
		return out
	}
	want := append([]byte(nil), copyHeader...)
	for _, id := range ids(1) {
		want = appendRow(want, int64(id), 0)
	}
	want = append(want, copyTrailer...)

	for k := range 4 {
		if err := o.Add(0, ids(1+per*k)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, func() bool { return o.Progress().Dropped >= uint64(per*(k+1)) })
	}
	close(lc.release)
	if got := <-lc.got; !bytes.Equal(got, want) {
		t.Fatalf("the failed COPY's buffer was reused while pgx could still read it: its first row holds ID %d, want 1", firstID(got))
	}
	res, err := o.Finish(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if res.Verdict != VerdictUnknown || res.Dropped != 4*per {
		t.Fatalf("verdict %v (%s), dropped %d; want unknown, %d", res.Verdict, res.Reason, res.Dropped, 4*per)
	}
}

// firstID decodes the ID of the first row of a COPY BINARY stream.
func firstID(stream []byte) int64 {
	off := len(copyHeader) + 2 + 4
	if len(stream) < off+8 {
		return -1
	}
	return int64(binary.BigEndian.Uint64(stream[off:]))
}
