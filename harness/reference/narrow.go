package reference

import (
	"github.com/snowchaos/snowchaos/generator"
)

// NameNarrowWorker names the NarrowWorker reference generator.
const NameNarrowWorker = "bad-narrow-worker"

// NewNarrowWorker returns the safe generator (policy wait, no checkpoint)
// with one bug: it keeps the worker ID in one bit fewer than the layout's
// node field, so the top half of the worker range issues the IDs of the
// bottom half (worker 1023 of a 10-bit field issues worker 511's IDs), as
// generators that hard-code a narrower worker field or mask it off by one
// bit do. Only a scenario with nodes in both halves of the range catches
// it: a suite that only uses small worker IDs never does.
func NewNarrowWorker(s generator.Settings) (Generator, error) {
	l := s.Layout.Normalize()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if s.Node < 0 || s.Node > l.MaxNode() {
		// The same refusal as the safe generator, before the mask hides it.
		_, err := l.Compose(0, s.Node, 0)
		return nil, err
	}
	g, err := generator.New(generator.Settings{
		Layout:  l,
		Node:    s.Node & (l.MaxNode() >> 1), // BUG: the node field's top bit is dropped
		Policy:  generator.PolicyWait,
		MaxWait: s.MaxWait,
		Clock:   s.Clock,
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}
