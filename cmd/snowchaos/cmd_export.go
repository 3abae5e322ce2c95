package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
)

func init() {
	register(command{name: "export", summary: "export a scenario's faults for another engine (export chaos-mesh SCENARIO)", run: runExport})
}

// kubeBinary is the program that implements export chaos-mesh; envKubeBin
// names another path to it.
const (
	kubeBinary = "snowchaos-kube"
	envKubeBin = "SNOWCHAOS_KUBE_BIN"
)

const exportUsage = `usage: snowchaos export chaos-mesh [flags] SCENARIO

Writes the Chaos Mesh Workflow that injects SCENARIO's faults (a scenario
file, or the name of a built-in one) into a snowchaos fleet on Kubernetes,
as YAML on stdout, with every fault it cannot map named with the reason
(snowchaos export chaos-mesh -h lists the flags).

The Kubernetes and Chaos Mesh API types live in a module of their own
(deploy/kube), so that snowchaos does not depend on them: this command runs
the ` + kubeBinary + ` binary, found on PATH or at $` + envKubeBin + `. Build it from
a checkout with

    make kube-build        # writes bin/` + kubeBinary + `

(or: cd deploy/kube && go build -o ../../bin/` + kubeBinary + ` ./cmd/` + kubeBinary + `)
and put bin/ on PATH. docs/kubernetes.md says how the Workflow, the fleet
and snowchaos run work together.
`

// runExport hands `export chaos-mesh ...` to snowchaos-kube, with this
// process's standard streams, and returns its exit code.
func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stderr, exportUsage)
		if len(args) == 0 {
			return exitInvalid
		}
		return exitOK
	}
	if args[0] != "chaos-mesh" {
		fmt.Fprintf(stderr, "snowchaos export: unknown engine %q (known: chaos-mesh)\n\n%s", args[0], exportUsage)
		return exitInvalid
	}
	bin, err := findKube(os.Getenv, exec.LookPath)
	if err != nil {
		fmt.Fprintf(stderr, "snowchaos export chaos-mesh: %v\n\n%s", err, exportUsage)
		return exitInvalid
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"export"}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() >= 0 {
			return ee.ExitCode()
		}
		fmt.Fprintf(stderr, "snowchaos export chaos-mesh: running %s: %v\n", bin, err)
		return exitInvalid
	}
	return exitOK
}

// findKube returns the snowchaos-kube binary: $SNOWCHAOS_KUBE_BIN when set
// (it must exist), else the one on PATH.
func findKube(getenv func(string) string, lookPath func(string) (string, error)) (string, error) {
	if p := getenv(envKubeBin); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("$%s=%s: %w", envKubeBin, p, err)
		}
		return p, nil
	}
	p, err := lookPath(kubeBinary)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH (and $%s is not set)", kubeBinary, envKubeBin)
	}
	return p, nil
}
