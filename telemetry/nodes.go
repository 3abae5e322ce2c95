package telemetry

import (
	"fmt"
	"maps"
	"slices"
	"sync"
)

// nodeSet holds a collector's per-node metrics: at most Options.MaxNodes
// entries, each built once, with its series, on first use.
type nodeSet[T any] struct {
	opts Options
	mu   struct {
		sync.Mutex
		m map[string]T
	}
}

// get returns name's entry, building it on first use from the node's label
// values (none in single mode). Errors wrap ErrNodeName or ErrTooManyNodes.
func (s *nodeSet[T]) get(name string, build func(labels []string) T) (T, error) {
	var zero T
	if err := s.opts.checkName(name); err != nil {
		return zero, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.mu.m[name]; ok {
		return v, nil
	}
	if len(s.mu.m) >= s.opts.maxNodes() {
		return zero, fmt.Errorf("%w: %d (adding %q)", ErrTooManyNodes, len(s.mu.m), name)
	}
	var lv []string
	if s.opts.PerNode {
		lv = []string{name}
	}
	v := build(lv)
	if s.mu.m == nil {
		s.mu.m = map[string]T{}
	}
	s.mu.m[name] = v
	return v, nil
}

// names returns the entries' names, sorted.
func (s *nodeSet[T]) names() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.mu.m))
}

// all returns the entries, in no particular order.
func (s *nodeSet[T]) all() []T {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Collect(maps.Values(s.mu.m))
}

// remove deletes name's entry and returns it.
func (s *nodeSet[T]) remove(name string) (T, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.mu.m[name]
	delete(s.mu.m, name)
	return v, ok
}

// withLabels returns lv followed by extra, in a fresh slice.
func withLabels(lv []string, extra ...string) []string {
	return append(append([]string(nil), lv...), extra...)
}
