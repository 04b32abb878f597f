package frontend

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the front end's own series, exported with the server's
// (httpapi.Config.Metrics): the cluster's capacity as its live workers
// publish it, each worker's free sandboxes, and how often placement had to
// try another worker or lost a call. No series is labelled by key.
type metrics struct {
	retries *prometheus.CounterVec
	lost    prometheus.Counter
}

func newMetrics() *metrics {
	return &metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "scratchrun_placement_retries_total",
			Help: "Calls sent on to another worker, by why (a worker's refusal reason, no_responders, no_answer, publish, elsewhere).",
		}, []string{"reason"}),
		lost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "scratchrun_cluster_lost_calls_total",
			Help: "Calls lost with their worker after it had them (their code may have run).",
		}),
	}
}

// Collectors are the front end's metrics, for the server to export.
func (f *Frontend) Collectors() []prometheus.Collector {
	return []prometheus.Collector{f.m.retries, f.m.lost, &clusterCollector{f: f,
		workers:  prometheus.NewDesc("scratchrun_cluster_workers", "Workers live now (heard within the live window).", nil, nil),
		capacity: prometheus.NewDesc("scratchrun_cluster_capacity", "Sandboxes the live workers could have going now: those running and those their admission would still start.", nil, nil),
		free:     prometheus.NewDesc("scratchrun_cluster_free", "Sandboxes the live workers' admission would start now, together.", nil, nil),
		running:  prometheus.NewDesc("scratchrun_cluster_running", "Calls the live workers run now, together.", nil, nil),
		perFree:  prometheus.NewDesc("scratchrun_worker_free_sandboxes", "Sandboxes a live worker's admission would start now, as it last published.", []string{"worker"}, nil),
		perRun:   prometheus.NewDesc("scratchrun_worker_running", "Calls a live worker runs, as it last published.", []string{"worker"}, nil),
		waiting:  prometheus.NewDesc("scratchrun_cluster_waiting", "Calls of this front end waiting for a worker with room.", nil, nil),
		held:     prometheus.NewDesc("scratchrun_cluster_held_answer_bytes", "Bytes of workers' answers the calls in flight hold (unread, out of order, parts of results).", nil, nil),
	}}
}

// clusterCollector reads the registry at scrape time.
type clusterCollector struct {
	f                                                 *Frontend
	workers, capacity, free, running, perFree, perRun *prometheus.Desc
	waiting, held                                     *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.workers, c.capacity, c.free, c.running, c.perFree, c.perRun, c.waiting, c.held} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	live := c.f.reg.live(time.Now())
	var free, running int
	for _, w := range live {
		free += w.Free()
		running += w.Running()
		ch <- prometheus.MustNewConstMetric(c.perFree, prometheus.GaugeValue, float64(w.Free()), w.ID)
		ch <- prometheus.MustNewConstMetric(c.perRun, prometheus.GaugeValue, float64(w.Running()), w.ID)
	}
	ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(len(live)))
	ch <- prometheus.MustNewConstMetric(c.capacity, prometheus.GaugeValue, float64(free+running))
	ch <- prometheus.MustNewConstMetric(c.free, prometheus.GaugeValue, float64(free))
	ch <- prometheus.MustNewConstMetric(c.running, prometheus.GaugeValue, float64(running))
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(c.f.line.len()))
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(c.f.held.now.Load()))
}
