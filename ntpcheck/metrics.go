package ntpcheck

import (
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names, after node_exporter's ntp collector with the snowflake_
// prefix. Every metric carries a server label.
const (
	MetricOffset       = "snowflake_ntp_offset_seconds"
	MetricRTT          = "snowflake_ntp_rtt_seconds"
	MetricRootDistance = "snowflake_ntp_root_distance_seconds"
	MetricStratum      = "snowflake_ntp_stratum"
	MetricLeap         = "snowflake_ntp_leap"
	MetricSanity       = "snowflake_ntp_sanity"
	MetricQueries      = "snowflake_ntp_queries_total"
	MetricLastSuccess  = "snowflake_ntp_last_success_timestamp_seconds"
)

var (
	descOffset = prometheus.NewDesc(MetricOffset,
		"Offset of the server's clock from the host's at the last check (positive: host behind).", []string{"server"}, nil)
	descRTT = prometheus.NewDesc(MetricRTT,
		"Round-trip time of the kept query at the last check.", []string{"server"}, nil)
	descRootDistance = prometheus.NewDesc(MetricRootDistance,
		"Estimated root distance (RTT/2 + root delay/2 + root dispersion) at the last check.", []string{"server"}, nil)
	descStratum = prometheus.NewDesc(MetricStratum,
		"Stratum the server reported at the last check (0: kiss-of-death or unsynchronised).", []string{"server"}, nil)
	descLeap = prometheus.NewDesc(MetricLeap,
		"Leap indicator the server reported at the last check, 2 bits (3: unsynchronised).", []string{"server"}, nil)
	descSanity = prometheus.NewDesc(MetricSanity,
		"1 when the server's last answer passed node_exporter's SNTP sanity heuristics, else 0.", []string{"server"}, nil)
	descQueries = prometheus.NewDesc(MetricQueries,
		"NTP queries sent, by server and outcome.", []string{"server", "result"}, nil)
	descLastSuccess = prometheus.NewDesc(MetricLastSuccess,
		"Unix time of the last check in which the server gave a usable answer.", []string{"server"}, nil)
)

// Collector exports check results as Prometheus metrics. It implements
// prometheus.Collector; Observe feeds it. Safe for concurrent use; a scrape
// costs a copy of the last results and never queries a server.
type Collector struct {
	mu struct {
		sync.Mutex
		order   []string
		servers map[string]*serverMetrics
	}
}

type serverMetrics struct {
	last        ServerResult
	checked     bool
	queries     map[Outcome]float64
	lastSuccess float64 // Unix seconds; 0 never
}

var _ prometheus.Collector = (*Collector)(nil)

// NewCollector returns a Collector with the queries counter of each given
// server pre-initialised to zero for every outcome.
func NewCollector(servers ...string) *Collector {
	c := &Collector{}
	c.mu.servers = map[string]*serverMetrics{}
	for _, s := range servers {
		if a, err := ParseServer(s); err == nil {
			s = a
		}
		c.serverLocked(s)
	}
	return c
}

// serverLocked returns the server's state, creating it; c.mu must be held.
func (c *Collector) serverLocked(s string) *serverMetrics {
	m, ok := c.mu.servers[s]
	if !ok {
		m = &serverMetrics{queries: map[Outcome]float64{}}
		for _, o := range Outcomes {
			m.queries[o] = 0
		}
		c.mu.servers[s] = m
		c.mu.order = append(c.mu.order, s)
	}
	return m
}

// Observe records a report: per-server gauges take its values and the
// query counters grow by its queries.
func (c *Collector) Observe(r Report) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range r.Servers {
		m := c.serverLocked(s.Server)
		m.last, m.checked = s, true
		for o, n := range s.Queries {
			m.queries[o] += float64(n)
		}
		if s.Usable && !r.Time.IsZero() {
			m.lastSuccess = float64(r.Time.UnixNano()) / 1e9
		}
	}
}

// Describe implements prometheus.Collector.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descOffset, descRTT, descRootDistance, descStratum, descLeap, descSanity, descQueries, descLastSuccess} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. Offset, RTT and root distance
// appear only for a server whose last answer was usable; stratum and leap
// for one that answered at all; sanity for every checked server.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	order := slices.Clone(c.mu.order)
	snap := make(map[string]serverMetrics, len(order))
	for _, s := range order {
		m := c.mu.servers[s]
		cp := *m
		cp.queries = make(map[Outcome]float64, len(m.queries))
		for k, v := range m.queries {
			cp.queries[k] = v
		}
		snap[s] = cp
	}
	c.mu.Unlock()

	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	for _, s := range order {
		m := snap[s]
		for _, o := range Outcomes {
			ch <- prometheus.MustNewConstMetric(descQueries, prometheus.CounterValue, m.queries[o], s, string(o))
		}
		if m.lastSuccess > 0 {
			gauge(descLastSuccess, m.lastSuccess, s)
		}
		if !m.checked {
			continue
		}
		l := m.last
		sane := 0.0
		if l.Sane {
			sane = 1
		}
		gauge(descSanity, sane, s)
		if l.Answered {
			gauge(descStratum, float64(l.Stratum), s)
			gauge(descLeap, float64(l.Leap), s)
		}
		if l.Usable {
			gauge(descOffset, l.Offset.Seconds(), s)
			gauge(descRTT, l.RTT.Seconds(), s)
			gauge(descRootDistance, l.RootDistance.Seconds(), s)
		}
	}
}
