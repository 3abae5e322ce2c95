package proclog

import (
	"strings"
	"sync"
	"testing"
)

func TestTailKeepsTheLastBytes(t *testing.T) {
	var tl Tail
	tl.Write([]byte(strings.Repeat("a", TailSize)))
	tl.Write([]byte("bc"))
	got := tl.String()
	if len(got) != TailSize || !strings.HasSuffix(got, "abc") || strings.Count(got, "a") != TailSize-2 {
		t.Fatalf("kept %d bytes ending %q, want the last %d", len(got), got[len(got)-3:], TailSize)
	}
}

func TestTailCopiesLinesWithPrefix(t *testing.T) {
	var out strings.Builder
	tl := Tail{Prefix: "[h] ", Out: &out}
	tl.Write([]byte("one\ntwo\nthr"))
	tl.Write([]byte("ee\n"))
	if want := "[h] one\n[h] two\n[h] thr[h] ee\n"; out.String() != want {
		t.Fatalf("copied %q, want %q", out.String(), want)
	}
	if tl.String() != "one\ntwo\nthree\n" {
		t.Fatalf("kept %q", tl.String())
	}
}

func TestTailConcurrent(t *testing.T) {
	var tl Tail
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				tl.Write([]byte("0123456789\n"))
				_ = tl.String()
			}
		})
	}
	wg.Wait()
	if n := len(tl.String()); n != TailSize {
		t.Fatalf("kept %d bytes after 8800 written, want %d", n, TailSize)
	}
}
