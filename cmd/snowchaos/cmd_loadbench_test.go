package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func TestLoadbench(t *testing.T) {
	var out, errb bytes.Buffer
	code := dispatch(context.Background(), []string{"loadbench", "--duration", "200ms", "--no-pg", "--workers", "4", "--batch", "256"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, &out, &errb)
	}
	for _, want := range []string{"HTTP GET /v1/id", "HTTP GET /v1/ids?count=256", "in-process"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, &out)
		}
	}
	out.Reset()
	if code := dispatch(context.Background(), []string{"loadbench", "--duration", "0s"}, &out, &errb); code != exitInvalid {
		t.Fatalf("bad duration: exit %d", code)
	}
}
