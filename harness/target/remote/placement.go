package remote

import (
	"net/http"
	"net/netip"
	"os/exec"
	"time"
)

// Placement is where a process target's host runs: the command that
// starts a process there and the address its node listens on. The zero
// Placement is this machine's own stack: the command as it is, loopback.
type Placement struct {
	// Command returns the command that runs name with args on the host
	// (for a namespace: ip netns exec NS name args...); nil: exec.Command.
	Command func(name string, args ...string) *exec.Cmd
	// Addr is the host's address, on which its node listens (a free
	// port); invalid: 127.0.0.1.
	Addr netip.Addr
}

// listen returns the node's --listen value.
func (p Placement) listen() string {
	if p.Addr.IsValid() {
		return netip.AddrPortFrom(p.Addr, 0).String()
	}
	return "127.0.0.1:0"
}

// command returns the command that runs name with args on the host.
func (p Placement) command(name string, args ...string) *exec.Cmd {
	if p.Command != nil {
		return p.Command(name, args...)
	}
	return exec.Command(name, args...)
}

// noFenceFlag is serve's negative-control flag for fence: off; it exists
// only in a snowchaos built with -tags negativecontrols.
const noFenceFlag = "--lease-no-fence"

// httpClient returns the client the target calls its nodes with: over
// Dial when set, else the keep-alive client of newHTTPClient.
func (t *Process) httpClient() *http.Client {
	if t.Dial == nil {
		return newHTTPClient()
	}
	return &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{DialContext: t.Dial, MaxIdleConnsPerHost: 64}}
}
