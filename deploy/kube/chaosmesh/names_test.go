package chaosmesh

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// FuzzDNSName: whatever a scenario calls its faults and itself, the names
// derived for the Workflow and its templates are valid DNS-1123 labels
// within the bound.
func FuzzDNSName(f *testing.F) {
	for _, s := range []string{"storm", "Step_Back.2", "", "---", "ÄÖÜ", "a-", "-a", "x" + string(make([]byte, 80))} {
		f.Add(s, 40)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		if n < 1 || n > 63 {
			return
		}
		got := dnsName(s, n)
		if len(got) > n {
			t.Fatalf("dnsName(%q, %d) = %q: too long", s, n, got)
		}
		if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
			t.Fatalf("dnsName(%q, %d) = %q: %v", s, n, got, errs)
		}
	})
}

func TestTemplateNamesUnique(t *testing.T) {
	b := &builder{used: map[string]bool{}}
	seen := map[string]bool{}
	for _, base := range []string{"a_b", "a-b", "A.B", "a b", "a-b-2"} {
		n := b.name(base)
		if seen[n] {
			t.Fatalf("name %q given twice", n)
		}
		seen[n] = true
	}
}
