// Command snowchaos-kube writes the Kubernetes side of snowchaos: the
// fleet's manifests and, for a scenario, the Chaos Mesh Workflow that
// injects its faults into that fleet.
//
//	snowchaos-kube export chaos-mesh [flags] SCENARIO   the Workflow, as YAML on stdout
//	snowchaos-kube fleet [flags]                        the fleet's manifests, as YAML on stdout
//
// It lives in its own module (deploy/kube) so that the Kubernetes and
// Chaos Mesh API modules stay out of snowchaos's own dependencies; `snowchaos
// export chaos-mesh` runs this binary.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/snowchaos/snowchaos/deploy/kube/chaosmesh"
	"github.com/snowchaos/snowchaos/deploy/kube/fleet"
	"github.com/snowchaos/snowchaos/harness/scenario"
	"github.com/snowchaos/snowchaos/scenarios"
)

// Exit codes, as snowchaos's.
const (
	exitOK         = 0
	exitIncomplete = 1 // --strict and a fault is not (fully) mapped
	exitInvalid    = 2 // bad flags or an invalid scenario
)

const usage = `usage:
  snowchaos-kube export chaos-mesh [flags] SCENARIO
  snowchaos-kube fleet [flags]

export chaos-mesh writes the Chaos Mesh Workflow that injects SCENARIO's
faults (a scenario file, or the name of a built-in one such as
step-back-small) into the fleet, as YAML on stdout: a comment block that
maps nodes to pods and says, for every fault, how it is injected or why it
cannot be, then the Workflow. Faults that are not (fully) mapped are also
listed on stderr. fleet writes the fleet's manifests (deploy/kube/manifests
holds them with the defaults).

Exit codes: 0 written, 1 with --strict when a fault is not fully mapped,
2 bad flags or an invalid scenario.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) >= 2 && args[0] == "export" && args[1] == "chaos-mesh":
		return runExport(args[2:], stdout, stderr)
	case len(args) >= 1 && args[0] == "fleet":
		return runFleet(args[1:], stdout, stderr)
	case len(args) == 1 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help"):
		fmt.Fprint(stdout, usage)
		return exitOK
	}
	fmt.Fprint(stderr, usage)
	return exitInvalid
}

// fleetFlags declares the flags that describe the fleet on fs.
func fleetFlags(fs *flag.FlagSet, c *fleet.Config) {
	fs.StringVar(&c.Namespace, "namespace", fleet.DefaultNamespace, "namespace of the fleet")
	fs.StringVar(&c.Name, "name", fleet.DefaultName, "StatefulSet name (pods NAME-0, NAME-1, ...)")
	fs.StringVar((*string)(&c.Store), "store", string(fleet.StorePostgres), "lease store: postgres or etcd")
	fs.StringVar(&c.Image, "image", fleet.DefaultImage, "snowchaos image (the repository's Dockerfile)")
}

func parse(fs *flag.FlagSet, args []string, stderr io.Writer) (ok bool, code int) {
	fs.SetOutput(stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return false, exitOK
		}
		return false, exitInvalid
	}
	return true, exitOK
}

func runExport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("export chaos-mesh", flag.ContinueOnError)
	var o chaosmesh.Options
	fleetFlags(fs, &o.Fleet)
	fs.StringVar(&o.Name, "workflow", "", "Workflow name (default snowchaos-SCENARIO)")
	strict := fs.Bool("strict", false, "exit 1 when a fault is not fully mapped")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\nflags of export chaos-mesh:\n")
		fs.PrintDefaults()
	}
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() != 1 {
		fmt.Fprintln(stderr, "snowchaos-kube export chaos-mesh: want one scenario (a file or a built-in name)")
		return exitInvalid
	}
	s, err := loadScenario(fs.Arg(0))
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos-kube export chaos-mesh: invalid scenario:\n%v\n", err)
		return exitInvalid
	}
	ex, err := chaosmesh.New(s, o)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos-kube export chaos-mesh: %s: %v\n", s.Name, err)
		return exitInvalid
	}
	if err := ex.Write(stdout); err != nil {
		fmt.Fprintf(stderr, "snowchaos-kube export chaos-mesh: %v\n", err)
		return exitInvalid
	}
	inc := ex.Incomplete()
	for _, m := range inc {
		fmt.Fprintf(stderr, "snowchaos-kube: %s: %s fault %s (line %d) %s: %s\n", s.Name, m.Kind, m.Fault, m.Line, m.Status, m.Reason)
	}
	if *strict && len(inc) > 0 {
		return exitIncomplete
	}
	return exitOK
}

// loadScenario parses a scenario file or, when no such file exists and
// name is a plain name, the built-in scenario of that name.
func loadScenario(name string) (*scenario.Scenario, error) {
	data, err := os.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) && !strings.ContainsAny(name, "/\\") {
		file := strings.TrimSuffix(name, ".yaml") + ".yaml"
		if b, e := fs.ReadFile(scenarios.FS, file); e == nil {
			return scenario.Parse("scenarios/"+file, b)
		}
		var names []string
		entries, _ := fs.Glob(scenarios.FS, "*.yaml")
		for _, e := range entries {
			names = append(names, strings.TrimSuffix(e, ".yaml"))
		}
		return nil, fmt.Errorf("%s: no such file, and no built-in scenario of that name (built-in: %s)", name, strings.Join(names, ", "))
	}
	if err != nil {
		return nil, err
	}
	return scenario.Parse(name, data)
}

func runFleet(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("fleet", flag.ContinueOnError)
	var c fleet.Config
	fleetFlags(fs, &c)
	replicas := fs.Int("replicas", fleet.DefaultReplicas, fmt.Sprintf("number of nodes, 1 to %d", fleet.MaxReplicas))
	fs.StringVar(&c.Policy, "policy", fleet.DefaultPolicy, "rewind policy: wait, refuse or logical")
	fs.DurationVar(&c.MaxWait, "max-wait", fleet.DefaultMaxWait, "per-call wait bound")
	fs.DurationVar(&c.LeaseTTL, "lease-ttl", 10*time.Second, "lease duration")
	fs.StringVar(&c.Storage, "storage", fleet.DefaultStorage, "size of each checkpoint and store volume")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage+"\nflags of fleet:\n")
		fs.PrintDefaults()
	}
	if ok, code := parse(fs, args, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "snowchaos-kube fleet: unexpected arguments %q\n", fs.Args())
		return exitInvalid
	}
	if *replicas < 1 || *replicas > fleet.MaxReplicas {
		fmt.Fprintf(stderr, "snowchaos-kube fleet: --replicas %d is outside [1, %d]\n", *replicas, fleet.MaxReplicas)
		return exitInvalid
	}
	c.Replicas = int32(*replicas)
	if err := fleet.Write(stdout, c); err != nil {
		fmt.Fprintf(stderr, "snowchaos-kube fleet: %v\n", err)
		return exitInvalid
	}
	return exitOK
}
