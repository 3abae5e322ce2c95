//go:build linux

package remote

import "testing"

func TestHostKey(t *testing.T) {
	for in, want := range map[string]string{
		"a":        "n-a",
		"a-clone":  "n-a-clone",
		"Node_A/1": "n-node-a-1",
		"store":    "n-store", // never the store's own host
		"a-very-long-host-name-that-goes-on-and-on": "n-a-very-long-host-name-that-goes-on-and",
	} {
		if got := hostKey(in); got != want {
			t.Errorf("hostKey(%q) = %q, want %q", in, got, want)
		}
	}
}
