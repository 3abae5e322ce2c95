//go:build !negativecontrols

package main

import "flag"

// addControlFlags adds nothing: serve's negative-control flags exist only
// in a binary built with -tags negativecontrols (see serve_controls.go).
func addControlFlags(*flag.FlagSet, *serveFlags) {}
