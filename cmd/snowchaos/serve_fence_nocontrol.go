//go:build !negativecontrols

package main

import "flag"

// addFenceControl adds nothing: --lease-no-fence exists only in a binary
// built with -tags negativecontrols (see serve_fence_control.go).
func addFenceControl(*flag.FlagSet, *serveFlags) {}
