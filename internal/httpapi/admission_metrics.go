package httpapi

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// admissionReporter is implemented by services with an admission of their
// own (the engine): how it stands now, cheaply, at every scrape.
type admissionReporter interface {
	Admission() execapi.AdmissionInfo
}

// admissionCollector reports at scrape time how the service's admission
// decides: calls waiting, running and starting, what it would admit, its
// upper bound, the memory in use and reserved against its budget, and the
// CPU pressure against its threshold. A service without admission (a
// remote one) reports the calls in the gate as in use and nothing else.
type admissionCollector struct {
	report func() execapi.AdmissionInfo // nil without admission
	inGate func() int

	waiting, inUse, starting, bound, free *prometheus.Desc
	capacity                              *prometheus.Desc
	budget, used, reserved, floor         *prometheus.Desc
	pressure, threshold                   *prometheus.Desc
}

func newAdmissionCollector(svc any, inGate func() int) *admissionCollector {
	d := func(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }
	c := &admissionCollector{
		inGate:    inGate,
		waiting:   d("scratchrun_queue_depth", "Calls waiting for room to start a sandbox."),
		inUse:     d("scratchrun_sandboxes_in_use", "Calls admitted and not yet ended (their sandboxes)."),
		starting:  d("scratchrun_admission_starting", "Admitted calls whose sandboxes the gauges cannot see yet."),
		bound:     d("scratchrun_admission_cpu_bound", "Admitted calls seen computing (their sandboxes demand a CPU)."),
		free:      d("scratchrun_admission_free", "Calls admission would start now, as its gauges stand."),
		capacity:  d("scratchrun_capacity", "Upper bound on calls running at once (the operator's --capacity, else a safety maximum)."),
		budget:    d("scratchrun_admission_memory_budget_bytes", "Memory all sandboxes may use together (0: no memory condition)."),
		used:      d("scratchrun_admission_memory_used_bytes", "Memory the sandboxes use now, measured under their cgroup parent."),
		reserved:  d("scratchrun_admission_memory_reserved_bytes", "Memory in use plus a floor for each call not yet measured."),
		floor:     d("scratchrun_admission_call_floor_bytes", "Memory reserved for a call until its sandbox is measured."),
		pressure:  d("scratchrun_admission_cpu_pressure", "Share of the last short window in which some runnable task waited for a CPU."),
		threshold: d("scratchrun_admission_cpu_threshold", "CPU pressure at which calls stop starting (0: no CPU condition)."),
	}
	if r, ok := svc.(admissionReporter); ok {
		c.report = r.Admission
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *admissionCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.waiting, c.inUse, c.starting, c.bound, c.free, c.capacity, c.budget, c.used, c.reserved, c.floor, c.pressure, c.threshold} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *admissionCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) { ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v) }
	if c.report == nil {
		gauge(c.waiting, 0)
		gauge(c.inUse, float64(c.inGate()))
		return
	}
	a := c.report()
	gauge(c.waiting, float64(a.Waiting))
	gauge(c.inUse, float64(a.Running))
	gauge(c.starting, float64(a.Starting))
	gauge(c.bound, float64(a.CPUBound))
	gauge(c.free, float64(a.Free))
	gauge(c.capacity, float64(a.Capacity))
	gauge(c.budget, float64(a.MemoryBudgetBytes))
	gauge(c.used, float64(a.MemoryUsedBytes))
	gauge(c.reserved, float64(a.MemoryReservedBytes))
	gauge(c.floor, float64(a.CallFloorBytes))
	gauge(c.pressure, a.CPUPressure)
	gauge(c.threshold, a.CPUThreshold)
}
