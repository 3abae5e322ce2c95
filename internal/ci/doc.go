// Package ci tests the CI scripts under .ci (which the go tool does not
// see as a package): .ci/install-debs runs against a sandboxed
// policy-rc.d, pid files and a fake apt-get, and must leave the machine's
// files as it found them.
package ci
