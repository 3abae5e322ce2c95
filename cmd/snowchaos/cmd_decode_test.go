package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snowchaos/snowchaos/generator"
)

func decodeRun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := runDecode(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestDecode(t *testing.T) {
	l := generator.DefaultLayout()
	id, err := l.Compose(3600007, 3, 2000)
	if err != nil {
		t.Fatal(err)
	}
	s := id.String()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--epoch", "2025-01-01T00:00:00Z", s}, s + " time=2025-01-01T01:00:00.007Z tick=3600007 node=3 seq=2000\n"},
		{[]string{s}, s + " time=2025-01-01T01:00:00.007Z tick=3600007 node=3 seq=2000\n"},
		{[]string{s, "--epoch=2024-01-01T00:00:00Z"}, s + " time=2024-01-01T01:00:00.007Z tick=3600007 node=3 seq=2000\n"},
		{[]string{"--layout", "41/5+5/12", s}, s + " time=2025-01-01T01:00:00.007Z tick=3600007 node=3 datacenter=0 worker=3 seq=2000\n"},
		{[]string{"--node-split", s}, s + " time=2025-01-01T01:00:00.007Z tick=3600007 node=3 datacenter=0 worker=3 seq=2000\n"},
		{[]string{"0", "--", "1"}, "0 time=2025-01-01T00:00:00.000Z tick=0 node=0 seq=0\n1 time=2025-01-01T00:00:00.000Z tick=0 node=0 seq=1\n"},
		{[]string{"--layout", "sonyflake", "65536"}, "65536 time=2025-01-01T00:00:00.000Z tick=0 node=256 seq=0\n"},
	} {
		code, out, errs := decodeRun(tc.args...)
		if code != exitOK || out != tc.want || errs != "" {
			t.Errorf("decode %q = %d, %q, %q; want %q", tc.args, code, out, errs, tc.want)
		}
	}
}

func TestDecodeJSON(t *testing.T) {
	l, _ := generator.LayoutByName("41/5+5/12")
	id, _ := l.Compose(1000, 2<<5|9, 7)
	code, out, errs := decodeRun("--json", "--layout", "41/5+5/12", id.String(), "5")
	if code != exitOK || errs != "" {
		t.Fatalf("decode --json = %d, %q", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines: %q", len(lines), out)
	}
	want := `{"id":"` + id.String() + `","layout":"41/5+5/12","tick":1000,"time":"2025-01-01T00:00:01.000Z","node":73,"datacenter":2,"worker":9,"seq":7}`
	if lines[0] != want {
		t.Errorf("got  %s\nwant %s", lines[0], want)
	}
	var d decoded
	if err := json.Unmarshal([]byte(lines[1]), &d); err != nil || d.ID != 5 || d.Seq != 5 {
		t.Errorf("second line %s: %+v %v", lines[1], d, err)
	}
	code, out, _ = decodeRun("--json", "7")
	if code != exitOK || strings.Contains(out, "worker") {
		t.Errorf("unsplit JSON shows worker: %s", out)
	}
}

func TestDecodeBadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no IDs given"},
		{[]string{""}, "empty"},
		{[]string{"-1"}, `"-1"`},
		{[]string{"abc"}, `"abc"`},
		{[]string{"18446744073709551615"}, `"18446744073709551615"`},
		{[]string{"9223372036854775808"}, `"9223372036854775808"`},
		{[]string{"+1"}, `"+1"`},
		{[]string{" 1"}, `" 1"`},
		{[]string{"5", "x"}, `"x"`},
		{[]string{"--layout", "40/10/12", "5"}, `"40/10/12"`},
		{[]string{"--layout", "4O/10/13", "5"}, `"4O/10/13"`},
		{[]string{"--epoch", "yesterday", "5"}, `"yesterday"`},
		{[]string{"--epoch", "1960-01-01T00:00:00Z", "5"}, "Epoch = 1960"},
		{[]string{"--bogus", "5"}, "bogus"},
	} {
		code, out, errs := decodeRun(tc.args...)
		if code != exitInvalid || out != "" || !strings.Contains(errs, tc.want) {
			t.Errorf("decode %q = %d, out %q, stderr %q; want exit 2 naming %q", tc.args, code, out, errs, tc.want)
		}
	}
	if code, _, _ := decodeRun("-h"); code != exitOK {
		t.Errorf("-h exits %d", code)
	}
}

func TestDecodeRegistered(t *testing.T) {
	for _, name := range []string{"decode", "gen"} {
		if _, ok := commands[name]; !ok {
			t.Errorf("%s not registered", name)
		}
	}
}
