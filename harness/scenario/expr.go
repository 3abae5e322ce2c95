package scenario

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Metric is a figure an invariant puts a threshold on.
type Metric string

// Metrics.
const (
	// MetricDuplicates counts IDs issued more than once, across all nodes,
	// clones and restarts.
	MetricDuplicates Metric = "duplicates"
	// MetricOrder counts IDs not greater than the previous ID of the same
	// sequential stream.
	MetricOrder Metric = "order_violations"
	// MetricRestart counts IDs issued after a restart (or handoff) that are
	// not greater than every ID the worker issued before it.
	MetricRestart Metric = "restart_violations"
	// MetricIDs counts IDs issued.
	MetricIDs Metric = "ids"
	// MetricRefusals counts requests answered with an error or not served.
	MetricRefusals Metric = "refusals"
	// MetricAvailability is the fraction of requests answered with IDs.
	MetricAvailability Metric = "availability"
	// MetricGap is the longest stretch of reference time in which requests
	// were made to a node and none was answered with IDs.
	MetricGap Metric = "gap"
	// MetricLead is how far an ID's embedded time runs ahead of the
	// reference time at which it was issued.
	MetricLead Metric = "lead"
	// MetricLeadOwn is the largest lead of an ID's embedded time over the
	// issuing node's own clock: after a rewind, the lead a logical clock
	// keeps over the clock it reads (which lead, against reference time,
	// does not show). The logical policy's max_lead bounds it.
	MetricLeadOwn Metric = "max_lead_own"
	// MetricLag is how far an ID's embedded time falls behind the
	// reference time at which it was issued.
	MetricLag Metric = "lag"
	// MetricWait is how long a request took from its arrival to its answer.
	MetricWait Metric = "wait"
	// MetricRefusedStarts counts node starts (first starts, restarts,
	// clones, handoffs) that the lease refused: every worker ID in the
	// range was held, or the node's clock was off its live peers' (the
	// peer clock check).
	MetricRefusedStarts Metric = "refused_starts"
	// MetricRebinds counts the times a node lost its lease, acquired
	// another one and rebuilt its generator on it.
	MetricRebinds Metric = "rebinds"
	// MetricLeaseOverruns counts IDs a leasing node issued while, by the
	// lease store's clock, it held no unexpired lease on their worker ID
	// (simulated memory leases).
	MetricLeaseOverruns Metric = "lease_overruns"
)

// Unit is the kind of value a metric takes.
type Unit uint8

// Units.
const (
	// UnitCount is a non-negative integer.
	UnitCount Unit = iota
	// UnitDuration is a Go duration ("200ms").
	UnitDuration
	// UnitRatio is a fraction in [0, 1], or a percentage ("99%").
	UnitRatio
)

// Stat is a statistic of a distribution-valued metric.
type Stat string

// Stats.
const (
	StatMax Stat = "max"
	StatP99 Stat = "p99"
	StatP50 Stat = "p50"
)

// MetricInfo describes a metric: its unit and what an expression on it may
// say.
type MetricInfo struct {
	Metric Metric
	Unit   Unit
	// Stats lists the statistics it has; empty for a single figure. The
	// first is the default.
	Stats []Stat
	// Doc is one line for documentation and errors.
	Doc string
}

var metrics = []MetricInfo{
	{MetricDuplicates, UnitCount, nil, "IDs issued more than once"},
	{MetricOrder, UnitCount, nil, "IDs not above the previous ID of their stream"},
	{MetricRestart, UnitCount, nil, "IDs after a restart not above every earlier ID of the worker"},
	{MetricIDs, UnitCount, nil, "IDs issued"},
	{MetricRefusals, UnitCount, nil, "requests not answered with IDs"},
	{MetricAvailability, UnitRatio, nil, "fraction of requests answered with IDs"},
	{MetricGap, UnitDuration, nil, "longest time a node answered no request"},
	{MetricLead, UnitDuration, []Stat{StatMax, StatP99, StatP50}, "embedded time ahead of reference time"},
	{MetricLeadOwn, UnitDuration, nil, "largest lead of embedded time over the issuing node's own clock"},
	{MetricLag, UnitDuration, []Stat{StatMax, StatP99, StatP50}, "embedded time behind reference time"},
	{MetricWait, UnitDuration, []Stat{StatMax, StatP99, StatP50}, "time from a request's arrival to its answer"},
	{MetricRefusedStarts, UnitCount, nil, "node starts refused a worker ID by the lease"},
	{MetricRebinds, UnitCount, nil, "generators rebuilt on a new lease after losing one"},
	{MetricLeaseOverruns, UnitCount, nil, "IDs issued while, by the store's clock, the node's lease had ended"},
}

// aliases map convenience names to a metric and statistic.
var aliases = map[string]struct {
	m Metric
	s Stat
}{
	"max_wait":    {MetricWait, StatMax},
	"max_lead":    {MetricLead, StatMax},
	"max_lag":     {MetricLag, StatMax},
	"longest_gap": {MetricGap, ""},
	"errors":      {MetricRefusals, ""},
}

// Metrics lists every metric.
func Metrics() []MetricInfo { return append([]MetricInfo(nil), metrics...) }

// Info returns the metric's description.
func (m Metric) Info() (MetricInfo, bool) {
	for _, i := range metrics {
		if i.Metric == m {
			return i, true
		}
	}
	return MetricInfo{}, false
}

// metricNames is every name an expression may start with, for suggestions.
func metricNames() []string {
	var out []string
	for _, i := range metrics {
		out = append(out, string(i.Metric))
	}
	for a := range aliases {
		out = append(out, a)
	}
	sort.Strings(out)
	return out
}

// Op is a comparison.
type Op string

// Comparisons.
const (
	OpEQ Op = "=="
	OpNE Op = "!="
	OpLT Op = "<"
	OpLE Op = "<="
	OpGT Op = ">"
	OpGE Op = ">="
)

// Expr is one threshold:
// "<metric> [stat] <op> <value> [during <fault>] [in simulated|real mode]".
type Expr struct {
	// Text is the expression as written.
	Text string
	// Metric is what it measures.
	Metric Metric
	// Stat is the statistic for distribution-valued metrics ("" otherwise).
	Stat Stat
	// Op compares the observed figure with Value.
	Op Op
	// Value is the threshold: a count, nanoseconds, or a ratio.
	Value float64
	// During, when set, restricts the figure to the observation windows of
	// the fault with that name, or of every fault of that kind.
	During string
	// Mode, when set, is the only mode the expression is judged in
	// ("in simulated mode": a figure that only simulated time's exact
	// ordering fixes); in the other mode its cell is n/a with the reason.
	// Safety figures (duplicates, order and restart violations, lease
	// overruns) take no mode: they hold in both.
	Mode Mode
	// Expected is true for an expectation of a negative control.
	Expected bool
	// Informational is true for an invariant shown for a negative control
	// without deciding its verdict (see Scenario.ChecksFor).
	Informational bool
	// Line is the expression's line.
	Line int
}

// Safety reports whether m counts a safety failure (duplicates, order
// and restart violations, lease overruns): bounds on it are judged as
// written in every mode, with no tolerance and no mode of their own.
func (m Metric) Safety() bool {
	switch m {
	case MetricDuplicates, MetricOrder, MetricRestart, MetricLeaseOverruns:
		return true
	}
	return false
}

// Unit returns the unit of the expression's metric.
func (e Expr) Unit() Unit {
	i, _ := e.Metric.Info()
	return i.Unit
}

// Subject is the metric, statistic and window the expression is about,
// e.g. "lead max during leap": two expressions with the same subject
// constrain the same figure.
func (e Expr) Subject() string {
	s := string(e.Metric)
	if e.Stat != "" {
		s += " " + string(e.Stat)
	}
	if e.During != "" {
		s += " during " + e.During
	}
	return s
}

// String returns the expression in canonical form.
func (e Expr) String() string {
	s := string(e.Metric)
	if e.Stat != "" {
		s += " " + string(e.Stat)
	}
	s += " " + string(e.Op) + " " + e.Format(e.Value)
	if e.During != "" {
		s += " during " + e.During
	}
	if e.Mode != "" {
		s += " in " + string(e.Mode) + " mode"
	}
	return s
}

// Holds reports whether an observed figure satisfies the expression.
func (e Expr) Holds(observed float64) bool {
	switch e.Op {
	case OpEQ:
		return observed == e.Value
	case OpNE:
		return observed != e.Value
	case OpLT:
		return observed < e.Value
	case OpLE:
		return observed <= e.Value
	case OpGT:
		return observed > e.Value
	case OpGE:
		return observed >= e.Value
	}
	return false
}

// Format renders a figure in the expression's unit.
func (e Expr) Format(v float64) string { return FormatValue(e.Unit(), v) }

// FormatValue renders a figure: counts as integers, durations as Go
// durations, ratios with four decimals.
func FormatValue(u Unit, v float64) string {
	switch u {
	case UnitDuration:
		return FormatDuration(time.Duration(v))
	case UnitRatio:
		return strconv.FormatFloat(v, 'f', 4, 64)
	}
	return strconv.FormatFloat(v, 'f', 0, 64)
}

// FormatDuration renders d rounded to a readable precision (microseconds
// below a second, milliseconds above).
func FormatDuration(d time.Duration) string {
	switch a := max(d, -d); {
	case a == 0:
		return "0s"
	case a < time.Microsecond:
		return d.String()
	case a < time.Second:
		return d.Round(time.Microsecond).String()
	default:
		return d.Round(time.Millisecond).String()
	}
}

// ParseExpr parses an invariant expression. Errors say what is wrong
// without a position; Parse adds the file and line.
func ParseExpr(s string) (Expr, error) {
	e := Expr{Text: strings.TrimSpace(s)}
	toks, err := tokenize(s)
	if err != nil {
		return e, err
	}
	if len(toks) == 0 {
		return e, fmt.Errorf("empty invariant (want e.g. %q)", "duplicates == 0")
	}
	name := toks[0]
	toks = toks[1:]
	if a, ok := aliases[name]; ok {
		e.Metric, e.Stat = a.m, a.s
	} else {
		e.Metric = Metric(name)
	}
	info, ok := e.Metric.Info()
	if !ok {
		return e, fmt.Errorf("unknown invariant %q%s (known: %s)", name, suggest(name, metricNames()), strings.Join(metricNames(), ", "))
	}
	if len(toks) > 0 && !isOp(toks[0]) {
		st := Stat(toks[0])
		if len(info.Stats) == 0 {
			return e, fmt.Errorf("%s has no statistic %q: want %s <op> <value>", name, toks[0], name)
		}
		if e.Stat != "" {
			return e, fmt.Errorf("%s already names its statistic; remove %q", name, toks[0])
		}
		if !containsStat(info.Stats, st) {
			return e, fmt.Errorf("%s has no statistic %q (want one of %s)", name, toks[0], joinStats(info.Stats))
		}
		e.Stat = st
		toks = toks[1:]
	}
	if e.Stat == "" && len(info.Stats) > 0 {
		e.Stat = info.Stats[0]
	}
	if len(toks) == 0 || !isOp(toks[0]) {
		return e, fmt.Errorf("want a comparison (==, !=, <, <=, >, >=) after %q", name)
	}
	e.Op = Op(toks[0])
	toks = toks[1:]
	if len(toks) == 0 {
		return e, fmt.Errorf("want a value after %q", e.Op)
	}
	v, err := parseValue(info, toks[0])
	if err != nil {
		return e, err
	}
	e.Value = v
	toks = toks[1:]
	if n := len(toks); n >= 3 && toks[n-3] == "in" && toks[n-1] == "mode" {
		switch m := Mode(toks[n-2]); m {
		case ModeSimulated, ModeReal:
			e.Mode = m
		default:
			return e, fmt.Errorf("in %q mode: want \"in simulated mode\" or \"in real mode\"", toks[n-2])
		}
		if e.Metric.Safety() {
			return e, fmt.Errorf("%s is a safety figure: it holds in every mode, so it takes no \"in %s mode\"", e.Metric, e.Mode)
		}
		toks = toks[:n-3]
	}
	if len(toks) > 0 {
		if toks[0] != "during" {
			return e, fmt.Errorf("unexpected %q after the value (want \"during <fault>\", \"in simulated|real mode\" or nothing)", toks[0])
		}
		if len(toks) != 2 {
			return e, fmt.Errorf("want one fault name after \"during\"")
		}
		switch e.Metric {
		case MetricAvailability, MetricGap, MetricDuplicates, MetricIDs, MetricRefusals, MetricLead, MetricLeadOwn, MetricLag, MetricWait:
		default:
			return e, fmt.Errorf("%s is counted over the whole run; it takes no \"during\"", e.Metric)
		}
		e.During = toks[1]
	}
	return e, nil
}

func parseValue(info MetricInfo, s string) (float64, error) {
	switch info.Unit {
	case UnitDuration:
		d, err := time.ParseDuration(s)
		if err != nil {
			return 0, fmt.Errorf("%s takes a duration such as 200ms, not %q", info.Metric, s)
		}
		return float64(d), nil
	case UnitRatio:
		if p, ok := strings.CutSuffix(s, "%"); ok {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f < 0 || f > 100 || math.IsNaN(f) {
				return 0, fmt.Errorf("%s takes a ratio in [0, 1] or a percentage, not %q", info.Metric, s)
			}
			return f / 100, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f < 0 || f > 1 || math.IsNaN(f) {
			return 0, fmt.Errorf("%s takes a ratio in [0, 1] or a percentage, not %q", info.Metric, s)
		}
		return f, nil
	}
	n, err := strconv.ParseUint(s, 10, 63)
	if err != nil {
		return 0, fmt.Errorf("%s takes a whole number, not %q", info.Metric, s)
	}
	return float64(n), nil
}

func isOp(s string) bool {
	switch Op(s) {
	case OpEQ, OpNE, OpLT, OpLE, OpGT, OpGE:
		return true
	}
	return false
}

// tokenize splits an expression into words and operators; operators need
// no surrounding spaces ("duplicates==0").
func tokenize(s string) ([]string, error) {
	var out []string
	i := 0
	for i < len(s) {
		c := s[i]
		switch {
		case c == ' ' || c == '\t':
			i++
		case c == '<' || c == '>' || c == '=' || c == '!':
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			op := s[i:j]
			if !isOp(op) {
				return nil, fmt.Errorf("unknown comparison %q (want ==, !=, <, <=, >, >=)", op)
			}
			out = append(out, op)
			i = j
		default:
			j := i
			for j < len(s) && s[j] != ' ' && s[j] != '\t' && s[j] != '<' && s[j] != '>' && s[j] != '=' && s[j] != '!' {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out, nil
}

func containsStat(ss []Stat, s Stat) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func joinStats(ss []Stat) string {
	parts := make([]string, len(ss))
	for i, s := range ss {
		parts[i] = string(s)
	}
	return strings.Join(parts, ", ")
}

// suggest returns ` (did you mean "x"?)` for the nearest candidate within
// a small edit distance, or "".
func suggest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := editDistance(strings.ToLower(s), c)
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	limit := max(2, len(s)/3)
	if best == "" || bestD > limit {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return 1 << 20
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
