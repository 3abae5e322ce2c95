//go:build negativecontrols

package main

import "flag"

// addFenceControl adds serve's --lease-no-fence. It exists only in a
// binary built with -tags negativecontrols, for the harness to show that
// it catches a node that issues without holding its lease (fence: off in
// a scenario); never build production binaries with that tag.
func addFenceControl(fs *flag.FlagSet, f *serveFlags) {
	fs.BoolVar(&f.noFence, "lease-no-fence", false,
		"NEGATIVE CONTROL: issue whether the lease is held or not (renewals failing or the lease lost do not stop the generator)")
}
