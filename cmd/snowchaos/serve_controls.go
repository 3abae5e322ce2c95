//go:build negativecontrols

package main

import "flag"

// addControlFlags adds serve's negative-control flags. They exist only in
// a binary built with -tags negativecontrols, for the harness to show that
// it catches the behaviour they bring back; never build production
// binaries with that tag.
func addControlFlags(fs *flag.FlagSet, f *serveFlags) {
	fs.BoolVar(&f.markAtRenewal, "lease-mark-at-renewal", false,
		"NEGATIVE CONTROL: write the mark to the lease store only at renewal and release, so that after a crash a successor can repeat IDs")
	fs.BoolVar(&f.noFence, "lease-no-fence", false,
		"NEGATIVE CONTROL: issue whether the lease is held or not (renewals failing or the lease lost do not stop the generator)")
}
