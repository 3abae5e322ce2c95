// Package exec is the harness target that runs any command as a node: a
// user's ID generator, in any language, unmodified. Each node is a child
// process (its worker ID and a free port handed over through templated
// arguments and environment); a restart is a real kill -9 and a new
// process, a clone a second process with the same configuration. The
// harness asks for IDs over stdio lines (it writes "N", the process
// answers N ID lines) or HTTP (a URL returning IDs as lines, a JSON array
// or a JSON field), and parses each ID in one step (ParseID): 64-bit
// Snowflakes in decimal (Issue), 128-bit UUIDs and ULIDs (IssueWide) or
// opaque strings (IssueStrings), as the exec block's id says.
//
// Clock faults reach the process from outside: through libfaketime (any
// program whose clock reads go through the C library) or, for Go programs,
// by rebuilding them from source with the runtime clock overlay
// (harness/extclock/goclock). A clock probe in the same environment measures the
// host clock the process reads, so every fault is confirmed or the
// verdict is unknown. A VM pause cannot be applied (see harness/extclock).
//
// Importing the package registers the target "exec" with harness/target.
package exec

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	osexec "os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/faults"
	"github.com/snowchaos/snowchaos/harness/extclock"
	"github.com/snowchaos/snowchaos/harness/extclock/faketime"
	"github.com/snowchaos/snowchaos/harness/extclock/goclock"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/harness/target"
	"github.com/snowchaos/snowchaos/verify"
)

func init() { target.Register(&Target{}) }

// OffsetTolerance is how closely the probe's reading must match the
// harness's model of the host clock.
const OffsetTolerance = time.Millisecond

// Errors.
var (
	// ErrGoBinary: a Go binary was given without its source; no route
	// reaches its clock.
	ErrGoBinary = errors.New("exec: a Go binary reads the wall clock through the vDSO, which libfaketime cannot intercept; give its source instead (clock: go, go_build: ./path/to/main) so the harness rebuilds it with the runtime clock overlay")
	// ErrHung: a request got no complete answer within the timeout; the
	// process was killed.
	ErrHung = errors.New("exec: no answer within the timeout: the process was killed")
)

// Target is the exec target. Its zero value is ready to use.
type Target struct {
	builds buildCache
}

var (
	_ target.WideTarget     = (*Target)(nil)
	_ target.FaultExplainer = (*Target)(nil)
)

// Info implements target.Target.
func (t *Target) Info() target.Info {
	// The clock faults of the capability list but a pause (NotApplicable
	// says why), restarts and clones.
	kinds := slices.DeleteFunc(faults.KindsOf(faults.ScopeClock, faults.InScenario), func(k faults.Kind) bool { return k == faults.KindPause })
	kinds = append(kinds, faults.KindRestart, faults.KindClone)
	return target.Info{
		Name: scenario.ExecTarget,
		Doc:  "any command as child processes (stdio or HTTP), kill -9 restarts, clones; clock faults through libfaketime or a Go runtime overlay",
		Caps: target.Capabilities{Faults: kinds, OffsetTolerance: OffsetTolerance},
	}
}

// IDKind implements target.WideTarget: the kind the exec block's id
// names.
func (t *Target) IDKind(spec target.NodeSpec) verify.Kind {
	if spec.Exec == nil {
		return verify.KindSnowflake
	}
	return spec.Exec.IDKind()
}

// NotApplicable implements target.FaultExplainer.
func (t *Target) NotApplicable(f scenario.Fault) string {
	if f.Kind == faults.KindPause {
		return "a VM pause stops the guest's monotonic clock too; an outside process keeps the host's (libfaketime runs with FAKETIME_DONT_FAKE_MONOTONIC, the Go overlay fakes the wall clock only), and SIGSTOP would pause the process but not its clocks"
	}
	return ""
}

// Start implements target.Target: a host (a directory and a clock) and
// the command's first process on it.
func (t *Target) Start(ctx context.Context, spec target.NodeSpec, env target.Env) (target.Node, error) {
	x := spec.Exec
	if x == nil {
		return nil, fmt.Errorf("%w: node %s: the exec target needs an exec block on the scenario's target", target.ErrUnsupported, spec.Name)
	}
	if scenario.LeaseKind(spec.Lease) != scenario.LeaseNone || spec.Checkpoint {
		return nil, fmt.Errorf("%w: node %s: the exec target's processes keep their own state: no lease or checkpoint", target.ErrUnsupported, spec.Name)
	}
	dir, err := os.MkdirTemp(hostDir(), "snowchaos-exec-"+sanitize(spec.Host)+"-")
	if err != nil {
		return nil, err
	}
	if x.TimeRequest == "" || x.Time == "" { // a block not made by the parser
		c := *x
		c.TimeRequest = cmp.Or(c.TimeRequest, "time")
		c.Time = cmp.Or(c.Time, scenario.TimeAuto)
		x = &c
	}
	n := &node{spec: spec, x: x, kind: x.IDKind(), dir: dir}
	n.mu.worker = -1
	if err := n.setup(ctx, &t.builds); err != nil {
		n.Close()
		return nil, err
	}
	if err := n.Start(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

// setup prepares the host's clock route: the program (built, for the Go
// route), the clock control and the probe.
func (n *node) setup(ctx context.Context, builds *buildCache) error {
	x := n.x
	switch x.Clock {
	case scenario.ClockGo:
		bin, err := builds.get(ctx, x.Dir, x.GoBuild)
		if err != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		n.bin = bin
		probe, err := builds.get(ctx, "", "")
		if err != nil {
			return fmt.Errorf("node %s: building the Go clock probe: %w", n.spec.Name, err)
		}
		page, err := goclock.NewPage(filepath.Join(n.dir, "clock.page"))
		if err != nil {
			return err
		}
		n.page = page
		n.clockEnv = []string{goclock.EnvPage + "=" + page.Path}
		n.host = extclock.New(realClock, n.spec.ClockOffset)
		if err := n.host.Add(page); err != nil {
			return err
		}
		n.probe, err = extclock.StartProbe(realClock, []string{probe}, append(os.Environ(), n.clockEnv...))
		return err
	case scenario.ClockFaketime:
		if err := checkNotGo(x); err != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		lib, err := faketime.Find()
		if err != nil {
			return fmt.Errorf("node %s: %w", n.spec.Name, err)
		}
		n.lib = lib
		if n.file, err = faketime.NewFile(filepath.Join(n.dir, "clock")); err != nil {
			return err
		}
		probeFile, err := faketime.NewFile(filepath.Join(n.dir, "probe.clock"))
		if err != nil {
			return err
		}
		n.host = extclock.New(realClock, n.spec.ClockOffset)
		if err := n.host.Add(n.file); err != nil {
			return err
		}
		started, _ := realClock.Now()
		n.probe, err = extclock.StartProbe(realClock, faketime.ProbeCommand, faketime.Env(lib, probeFile.Path, os.Environ()))
		if err != nil {
			return fmt.Errorf("node %s: the clock probe (perl): %w", n.spec.Name, err)
		}
		n.probePID = n.probe.PID()
		probeFile.SetStart(started)
		// The probe's own start time, once its library has written it
		// (an estimate until then: the probe is a diagnostic).
		if _, _, err := n.probe.Offset(context.Background()); err == nil {
			if s, err := faketime.StartTime(n.probePID); err == nil {
				probeFile.SetStart(s)
			}
		}
		return n.host.AddProbe(probeFile)
	}
	if n.spec.ClockOffset != 0 {
		return fmt.Errorf("%w: node %s starts with a clock offset but its exec block says clock: none", target.ErrUnsupported, n.spec.Name)
	}
	return nil
}

// hostDir is where hosts keep their clock files: /dev/shm when it is a
// writable directory (a tmpfs: the timestamp file that libfaketime opens
// at every clock reading, and that a fault rewrites, never waits for a
// disk), else the temporary directory.
func hostDir() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		if f, err := os.CreateTemp("/dev/shm", ".snowchaos-probe-"); err == nil {
			f.Close()
			os.Remove(f.Name())
			return "/dev/shm"
		}
	}
	return os.TempDir()
}

// checkNotGo refuses a Go binary on the libfaketime route.
func checkNotGo(x *scenario.Exec) error {
	if len(x.Command) == 0 {
		return errors.New("exec: empty command")
	}
	prog := x.Command[0]
	if strings.Contains(prog, "{") {
		return nil // a placeholder: checked when started
	}
	if strings.Contains(prog, "/") && !filepath.IsAbs(prog) {
		prog = filepath.Join(x.Dir, prog)
	}
	path, err := osexec.LookPath(prog)
	if err != nil {
		return fmt.Errorf("exec: command %q: %w", x.Command[0], err)
	}
	if ok, v := goclock.IsGoBinary(path); ok {
		return fmt.Errorf("%w (%s was built by %s)", ErrGoBinary, path, v)
	}
	return nil
}

// sanitize keeps a host name usable in a file name.
func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' {
			return r
		}
		return '_'
	}, s)
}

// Prebuild builds, ahead of the runs, every program the scenarios' exec
// targets rebuild with the Go clock overlay, and the Go clock probe, so
// no run spends its (real-time) duration compiling. It is optional: Start
// builds what is missing.
func (t *Target) Prebuild(ctx context.Context, suite []*scenario.Scenario) error {
	for _, s := range suite {
		for _, tg := range s.Targets {
			if x := tg.Exec; x != nil && x.Clock == scenario.ClockGo {
				if _, err := t.builds.get(ctx, x.Dir, x.GoBuild); err != nil {
					return fmt.Errorf("%s: target %s: %w", s.File, tg.Name, err)
				}
				if _, err := t.builds.get(ctx, "", ""); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Registered returns the registered exec target (for Prebuild).
func Registered() *Target {
	t, _ := target.Lookup(scenario.ExecTarget)
	return t.(*Target)
}
