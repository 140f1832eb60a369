package idempotency

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts what happened to idempotent requests, by outcome: created (first answer
// stored), replayed, conflict (409 in progress), mismatch (422 reuse), released
// (infrastructure failure, progress kept) and deleted (validation error, not stored).
type Metrics struct{ outcomes *prometheus.CounterVec }

// NewMetrics registers the counters on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "checkoutlab_idempotency_outcomes_total",
		Help: "Idempotent requests by outcome: created, replayed, conflict, mismatch, released, deleted.",
	}, []string{"outcome"})}
	for _, o := range []string{"created", "replayed", "conflict", "mismatch", "released", "deleted"} {
		m.outcomes.WithLabelValues(o) // show every outcome on /metrics from the start, at 0
	}
	reg.MustRegister(m.outcomes)
	return m
}

// count adds one to outcome; a nil *Metrics counts nothing.
func (m *Metrics) count(outcome string) {
	if m != nil {
		m.outcomes.WithLabelValues(outcome).Inc()
	}
}
