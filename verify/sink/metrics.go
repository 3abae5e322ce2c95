package sink

import "github.com/prometheus/client_golang/prometheus"

// collector exposes a sink's totals, read at scrape time.
type collector struct {
	s                                                            *Sink
	ids, dups, order, restart, bad, batches, incomplete, refused *prometheus.Desc
}

// Collector returns a Prometheus collector of the sink's running totals,
// labelled with its kind, read at scrape time (the sink pays nothing per
// ID for it):
//
//	snowchaos_verify_ids_total{kind}                 valid IDs received
//	snowchaos_verify_duplicates_total{kind}          IDs issued before
//	snowchaos_verify_order_violations_total{kind}    IDs not above their stream's previous one
//	snowchaos_verify_restart_violations_total{kind}  IDs not above an earlier incarnation's
//	snowchaos_verify_parse_errors_total{kind}        lines that were not valid
//	snowchaos_verify_batches_total{kind}             batches (requests, or reads of standard input)
//	snowchaos_verify_incomplete_batches_total{kind}  batches that stopped part way
//	snowchaos_verify_refused_total{kind}             requests and connections refused unread
func (s *Sink) Collector() prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("snowchaos_verify_"+name, help, nil, prometheus.Labels{"kind": s.cfg.Kind.String()})
	}
	return &collector{s: s,
		ids:        d("ids_total", "Valid IDs the verification sink received."),
		dups:       d("duplicates_total", "IDs received that were issued before (each repeat counts once)."),
		order:      d("order_violations_total", "IDs not above the previous ID of their stream."),
		restart:    d("restart_violations_total", "IDs not above every ID of an earlier incarnation of their issuer."),
		bad:        d("parse_errors_total", "Lines received that were not valid IDs (their batch's valid lines were still verified)."),
		batches:    d("batches_total", "Batches received: HTTP requests, or reads of standard input."),
		incomplete: d("incomplete_batches_total", "Batches that stopped part way (the body cut off, over its bound or past its timeout): what followed was not verified."),
		refused:    d("refused_total", "Requests and connections refused before their body was read (503 at a limit, 413 for a body announced too large)."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.ids, c.dups, c.order, c.restart, c.bad, c.batches, c.incomplete, c.refused} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.Totals()
	for _, m := range []struct {
		d *prometheus.Desc
		v uint64
	}{{c.ids, t.IDs}, {c.dups, t.Duplicates}, {c.order, t.OrderViolations}, {c.restart, t.RestartViolations},
		{c.bad, t.BadLines}, {c.batches, uint64(t.Batches)}, {c.incomplete, t.Incomplete}, {c.refused, t.Refused}} {
		ch <- prometheus.MustNewConstMetric(m.d, prometheus.CounterValue, float64(m.v))
	}
}
