package httpapi

import (
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// rejections counts the requests refused before they ran since the server
// started, by reason. It is the one count of them: /metrics exports it as
// scratchrun_rejections_total (it is the collector) and the console reads
// it (Server.Live), so that neither reads the other back.
type rejections struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	n    map[string]int64
}

// newRejections counts rejections, every one of reasons exported from the
// start, so that a dashboard sees zeros rather than missing series.
func newRejections(reasons ...string) *rejections {
	r := &rejections{
		desc: prometheus.NewDesc("scratchrun_rejections_total",
			"Requests refused before running, by reason (memory, cpu, at_capacity, queue_full, key_rate, key_concurrency, draining, no_workers, unknown_runtime, unauthorized, invalid_request, body_too_large, forbidden, unsupported_media_type).",
			[]string{"reason"}, nil),
		n: map[string]int64{},
	}
	for _, reason := range reasons {
		r.n[reason] = 0
	}
	return r
}

// add counts one request refused for reason.
func (r *rejections) add(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n[reason]++
}

// counts returns the counts by reason, a copy of its own.
func (r *rejections) counts() map[string]int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.n)
}

// Describe implements prometheus.Collector.
func (r *rejections) Describe(ch chan<- *prometheus.Desc) { ch <- r.desc }

// Collect implements prometheus.Collector.
func (r *rejections) Collect(ch chan<- prometheus.Metric) {
	for reason, n := range r.counts() {
		ch <- prometheus.MustNewConstMetric(r.desc, prometheus.CounterValue, float64(n), reason)
	}
}
