package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// metrics are the server's Prometheus series. Each server has its own
// registry, so that several servers (in tests) never share counters.
type metrics struct {
	registry     *prometheus.Registry
	runs         *prometheus.CounterVec   // runtime, outcome
	runSeconds   *prometheus.HistogramVec // runtime
	queueSeconds prometheus.Histogram
	httpSeconds  *prometheus.HistogramVec // route, code
	rejections   *rejections
	draining     prometheus.Gauge
}

// runBuckets span a trivial run (tens of ms) to the maximum timeout.
var runBuckets = []float64{0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 30, 60}

func newMetrics() *metrics {
	// The reasons a request can be refused for, each exported from the start.
	reasons := []string{reasonUnauthorized, reasonInvalidRequest, reasonBodyTooLarge, reasonForbidden, reasonMediaType}
	for _, r := range append(append([]execapi.RefusalReason{}, execapi.AdmissionRefusals...),
		execapi.RefusedKeyRate, execapi.RefusedKeyConcurrency, execapi.RefusedDraining, execapi.RefusedNoWorkers, execapi.RefusedSessionWorkerUnanswered) {
		reasons = append(reasons, string(r))
	}
	m := &metrics{
		registry:   prometheus.NewRegistry(),
		rejections: newRejections(reasons...),
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scratchrun_runs_total",
			Help: "Runs finished, by runtime and outcome (success, nonzero_exit, timeout, memory_limit, machine_memory, cancelled, error, worker_lost).",
		}, []string{"runtime", "outcome"}),
		runSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scratchrun_run_duration_seconds",
			Help:    "Wall time of runs in the engine (sandbox set-up, program, teardown), by runtime.",
			Buckets: runBuckets,
		}, []string{"runtime"}),
		queueSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "scratchrun_queue_wait_seconds",
			Help:    "Time admitted runs waited for room to start a sandbox.",
			Buckets: []float64{0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10},
		}),
		httpSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "scratchrun_http_request_duration_seconds",
			Help:    "Latency of HTTP requests, by route and status code.",
			Buckets: runBuckets,
		}, []string{"route", "code"}),
		draining: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "scratchrun_draining",
			Help: "1 while the server is draining for shutdown.",
		}),
	}
	m.registry.MustRegister(m.runs, m.runSeconds, m.queueSeconds, m.httpSeconds, m.rejections, m.draining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// poolStatser is implemented by services with a warm pool (the engine):
// ready sandboxes per pool key.
type poolStatser interface {
	PoolStats() map[execapi.PoolKey]int
}

// poolCollector reports scratchrun_pool_size at scrape time from the
// service's pool; every installed runtime has a series (0 without a pool).
type poolCollector struct {
	desc       *prometheus.Desc
	stats      func() map[execapi.PoolKey]int // nil when the service has no pool
	runtimes   []string
	defaultNet string
}

func newPoolCollector(svc any, runtimes []string, defaultNet string) *poolCollector {
	c := &poolCollector{
		desc: prometheus.NewDesc("scratchrun_pool_size",
			"Warm sandboxes ready to take a run, by runtime, network mode and variant.", []string{"runtime", "network", "variant"}, nil),
		runtimes: runtimes, defaultNet: defaultNet,
	}
	if ps, ok := svc.(poolStatser); ok {
		c.stats = ps.PoolStats
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *poolCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *poolCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{}
	if c.stats != nil {
		for key, n := range c.stats() {
			seen[key.Runtime] = true
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), key.Runtime, key.Network, key.Variant)
		}
	}
	for _, rt := range c.runtimes {
		if !seen[rt] {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, 0, rt, c.defaultNet, "")
		}
	}
}

func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{})
}

// statusRecorder remembers the status a handler wrote, for the latency series.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the first status written.
func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush keeps streaming (MCP's server-sent events) working through the wrapper.
func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// instrument records each request's latency under a fixed route label (never
// the raw path, which a client controls).
func (m *metrics) instrument(route string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		m.httpSeconds.WithLabelValues(route, strconv.Itoa(rec.status)).Observe(time.Since(start).Seconds())
	})
}
