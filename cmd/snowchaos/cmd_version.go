package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...";
// otherwise the build's own metadata names it (see versionString).
var version = "dev"

func init() {
	register(command{name: "version", summary: "print the version", run: runVersion})
}

func runVersion(_ context.Context, _ []string, stdout, _ io.Writer) int {
	fmt.Fprintln(stdout, versionString())
	return exitOK
}

// versionString names the build from its metadata: the module version a
// go install of a tagged release stamps, or the -ldflags version, then the
// commit, its time and whether the tree was modified (stamped by go build
// and go install in a checkout), the toolchain and the platform.
func versionString() string {
	v := version
	var vcs []string
	if bi, ok := debug.ReadBuildInfo(); ok {
		if mv := bi.Main.Version; v == "dev" && mv != "" && mv != "(devel)" {
			v = mv
		}
		set := map[string]string{}
		for _, s := range bi.Settings {
			set[s.Key] = s.Value
		}
		if r := set["vcs.revision"]; r != "" {
			c := "commit " + r
			if t := set["vcs.time"]; t != "" {
				c += " " + t
			}
			if set["vcs.modified"] == "true" {
				c += " (modified)"
			}
			vcs = append(vcs, c)
		}
	}
	parts := append([]string{"snowchaos", v}, vcs...)
	return strings.Join(append(parts, runtime.Version(), runtime.GOOS+"/"+runtime.GOARCH), " ")
}
