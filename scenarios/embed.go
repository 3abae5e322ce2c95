// Package scenarios embeds the built-in scenario suite, the YAML files in
// this directory, so the snowchaos binary runs it with no files around.
package scenarios

import "embed"

// FS holds the built-in scenario files (*.yaml) at its root.
//
//go:embed *.yaml
var FS embed.FS
