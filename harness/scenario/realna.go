package scenario

import (
	"strings"
	"unicode/utf8"
)

// MaxRealNA bounds the length of a real_na reason.
const MaxRealNA = 300

// realNA reads a real_na reason: a non-empty sentence of at most
// MaxRealNA characters saying why real mode cannot judge the scenario or
// target ("" when absent).
func (p *parser) realNA(l *leaf[text]) string {
	if !l.ok() {
		return ""
	}
	v := strings.TrimSpace(string(l.V))
	switch {
	case v == "":
		p.fail(l.N, "empty: say why real mode cannot judge this, e.g. real_na: 26 h of scenario time")
		return ""
	case utf8.RuneCountInString(v) > MaxRealNA:
		p.fail(l.N, "%d characters: at most %d", utf8.RuneCountInString(v), MaxRealNA)
		return ""
	}
	return v
}
