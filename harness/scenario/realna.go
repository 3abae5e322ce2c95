package scenario

import (
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// MaxRealNA bounds the length of a real_na reason.
const MaxRealNA = 300

// realNA parses a real_na reason: a non-empty sentence of at most
// MaxRealNA characters saying why real mode cannot judge the scenario or
// target.
func (p *parser) realNA(n *yaml.Node, key string) string {
	v, ok := p.scalar(n, key, "a reason (why real mode cannot judge this)")
	if !ok {
		return ""
	}
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		p.errorf(n, key, "empty: say why real mode cannot judge this, e.g. real_na: 26 h of scenario time")
		return ""
	case utf8.RuneCountInString(v) > MaxRealNA:
		p.errorf(n, key, "%d characters: at most %d", utf8.RuneCountInString(v), MaxRealNA)
		return ""
	}
	return v
}
