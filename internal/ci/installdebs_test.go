package ci

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snowchaos/snowchaos/internal/testenv"
)

// fakeAptGet records, at install time, what policy-rc.d answers for a
// service start (101: forbidden, or "absent"), optionally starts a daemon
// that writes its pid file (as a package whose service the machine's
// policy allows would), and fails or hangs on request.
const fakeAptGet = `#!/bin/sh
[ "$1" = install ] || exit 0
if [ -e "$POLICY_RC_D" ]; then "$POLICY_RC_D" chrony start; echo $? >"$SANDBOX/policy-answer"; else echo absent >"$SANDBOX/policy-answer"; fi
if [ -n "$START_DAEMON" ]; then
  sleep 300 </dev/null >/dev/null 2>&1 &
  echo $! >"$SANDBOX/chronyd.pid"
fi
case "$FAKE_APT" in
fail) exit 100 ;;
hang) touch "$SANDBOX/installing"; exec sleep 300 ;;
esac
exit 0
`

type sandbox struct {
	dir, policy string
}

func newSandbox(t *testing.T, policy []byte) sandbox {
	t.Helper()
	s := sandbox{dir: t.TempDir()}
	s.policy = filepath.Join(s.dir, "policy-rc.d")
	if policy != nil {
		if err := os.WriteFile(s.policy, policy, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(s.dir, "apt-get"), []byte(fakeAptGet), 0o755); err != nil {
		t.Fatal(err)
	}
	return s
}

// command runs .ci/install-debs in the sandbox, in its own process group.
func (s sandbox) command(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	script, err := filepath.Abs("../../.ci/install-debs")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.LookPath(t, "bash"), script, "chrony", "prometheus")
	cmd.Env = append(os.Environ(),
		"POLICY_RC_D="+s.policy, "APT_GET="+filepath.Join(s.dir, "apt-get"), "DEPS_LOCK="+filepath.Join(s.dir, "lock"),
		"DAEMON_PIDFILES="+filepath.Join(s.dir, "chronyd.pid"), "SUDO=", "SANDBOX="+s.dir)
	cmd.Env = append(cmd.Env, env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

func (s sandbox) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// machinePolicy is a policy-rc.d a machine might ship (this one lets
// services start), with content install-debs must keep byte for byte.
var machinePolicy = []byte("#!/bin/sh\n# the image's own policy\nexit 0\n")

// TestExistingPolicyKept: the machine's policy-rc.d is in force during the
// install and unchanged (content and mode) after it, also when the install
// fails.
func TestExistingPolicyKept(t *testing.T) {
	for _, mode := range []string{"ok", "fail"} {
		s := newSandbox(t, machinePolicy)
		out, err := s.command(t, "FAKE_APT="+mode).CombinedOutput()
		if (mode == "ok") != (err == nil) {
			t.Fatalf("%s install: %v\n%s", mode, err, out)
		}
		if got := s.read(t, "policy-answer"); got != "0" {
			t.Errorf("%s install: during it policy-rc.d answered %s, want the machine's own 0", mode, got)
		}
		b, err := os.ReadFile(s.policy)
		if err != nil || !bytes.Equal(b, machinePolicy) {
			t.Fatalf("%s install: policy-rc.d is now %q (%v), want the machine's %q", mode, b, err, machinePolicy)
		}
		if st, _ := os.Stat(s.policy); st.Mode().Perm() != 0o750 {
			t.Errorf("%s install: policy-rc.d mode %v, want 0750", mode, st.Mode().Perm())
		}
	}
}

// TestPolicyWrittenOnlyWhenAbsent: without a policy-rc.d one forbidding
// service starts is in force during the install and gone after it: on
// success, on failure and on SIGTERM.
func TestPolicyWrittenOnlyWhenAbsent(t *testing.T) {
	for _, mode := range []string{"ok", "fail", "sigterm"} {
		s := newSandbox(t, nil)
		var err error
		var out []byte
		if mode == "sigterm" {
			cmd := s.command(t, "FAKE_APT=hang")
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if !testenv.Eventually(context.Background(), 10*time.Second, func() bool {
				_, err := os.Stat(filepath.Join(s.dir, "installing"))
				return err == nil
			}) {
				syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				cmd.Wait()
				t.Fatalf("the fake install never started\n%s", buf.Bytes())
			}
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) // what a CI runner's cancel sends
			err, out = cmd.Wait(), buf.Bytes()
		} else {
			out, err = s.command(t, "FAKE_APT="+mode).CombinedOutput()
		}
		if (mode == "ok") != (err == nil) {
			t.Fatalf("%s: %v\n%s", mode, err, out)
		}
		if got := s.read(t, "policy-answer"); got != "101" {
			t.Errorf("%s: during the install policy-rc.d answered %s, want 101 (start nothing)", mode, got)
		}
		if _, err := os.Stat(s.policy); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: the policy-rc.d written for the install is still there (%v)\n%s", mode, err, out)
		}
	}
}

// TestDaemonStoppedByPidFileOnly: a daemon the install started (the
// machine's policy allowed it) is stopped through its pid file; a process
// of the same name that the install did not start keeps running.
func TestDaemonStoppedByPidFileOnly(t *testing.T) {
	s := newSandbox(t, machinePolicy)
	// A bystander named chronyd (what `pkill -x chronyd` would have ended).
	bin := filepath.Join(s.dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testenv.LookPath(t, "sleep"), filepath.Join(bin, "chronyd")); err != nil {
		t.Fatal(err)
	}
	bystander := exec.Command(filepath.Join(bin, "chronyd"), "300")
	if err := bystander.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { bystander.Process.Kill(); bystander.Wait() })

	out, err := s.command(t, "START_DAEMON=1").CombinedOutput()
	if err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	pid, err := strconv.Atoi(s.read(t, "chronyd.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if !testenv.Eventually(context.Background(), 10*time.Second, func() bool { return !alive(pid) }) {
		syscall.Kill(pid, syscall.SIGKILL)
		t.Fatalf("the daemon the install started (pid %d) still runs\n%s", pid, out)
	}
	if !alive(bystander.Process.Pid) {
		t.Fatal("a chronyd the install did not start was ended")
	}
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE ...
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] != 'Z'
}
