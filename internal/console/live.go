package console

import (
	"net/http"
	"slices"
	"strings"

	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// AdmissionState is how admission decides, as the Live page shows it: the
// calls it holds and how far it will go (the engine's admission by
// resources, execapi.AdmissionInfo), or, for a service with no admission
// of its own (a remote one), only the calls the server has in flight.
type AdmissionState struct {
	// Mode is "resources" (memory and CPU measured) or "none" (the service
	// admits calls itself, out of this server's sight).
	Mode string `json:"mode"`
	// Running counts the calls admitted and not yet ended (Starting of
	// them still starting their sandbox, CPUBound seen computing), Waiting
	// those queued for room; Free how many more would start now.
	Running  int `json:"running"`
	Starting int `json:"starting"`
	CPUBound int `json:"cpu_bound"`
	Waiting  int `json:"waiting"`
	Free     int `json:"free"`
	// Capacity bounds the calls running at once, MaxQueue those waiting,
	// QueueWaitMS how long each may wait.
	Capacity    int   `json:"capacity"`
	MaxQueue    int   `json:"max_queue"`
	QueueWaitMS int64 `json:"queue_wait_ms"`
	// MemoryBudgetBytes is what all sandboxes may use together (0: memory
	// is not measured), MemoryUsedBytes what they use, MemoryReservedBytes
	// that plus a floor for each call still starting.
	MemoryBudgetBytes   int64 `json:"memory_budget_bytes"`
	MemoryUsedBytes     int64 `json:"memory_used_bytes"`
	MemoryReservedBytes int64 `json:"memory_reserved_bytes"`
	// CPUPressure is the share of recent time runnable tasks waited for a
	// CPU (0 to 1), from CPUGauge; admission stops at CPUThreshold (0: CPU
	// is not measured).
	CPUPressure  float64 `json:"cpu_pressure"`
	CPUThreshold float64 `json:"cpu_threshold"`
	CPUGauge     string  `json:"cpu_gauge"`
	// Rejections counts admission's refusals since start, by reason.
	Rejections map[string]int64 `json:"rejections"`
}

// Admission modes.
const (
	ModeResources = "resources"
	ModeNone      = "none"
)

// admissionState is the Live page's view of l's admission.
func admissionState(l httpapi.Live) AdmissionState {
	a := l.Admission
	if a == nil {
		return AdmissionState{Mode: ModeNone, Running: l.InGate, Rejections: map[string]int64{}}
	}
	st := AdmissionState{
		Mode: ModeResources, Running: a.Running, Starting: a.Starting, CPUBound: a.CPUBound, Waiting: a.Waiting, Free: a.Free,
		Capacity: a.Capacity, MaxQueue: a.MaxQueue, QueueWaitMS: a.QueueWaitMS,
		MemoryBudgetBytes: a.MemoryBudgetBytes, MemoryUsedBytes: a.MemoryUsedBytes, MemoryReservedBytes: a.MemoryReservedBytes,
		CPUPressure: a.CPUPressure, CPUThreshold: a.CPUThreshold, CPUGauge: a.CPUGauge,
		Rejections: map[string]int64{},
	}
	for reason, n := range a.Rejections {
		st.Rejections[string(reason)] = n
	}
	return st
}

// poolView is one warm pool's ready sandboxes.
type poolView struct {
	Runtime string `json:"runtime"`
	Network string `json:"network"`
	Variant string `json:"variant"`
	Ready   int    `json:"ready"`
}

// liveView is GET /console/api/live.
type liveView struct {
	InFlight   int              `json:"in_flight"`
	Queued     int              `json:"queued"`
	Capacity   int              `json:"capacity"`
	Draining   bool             `json:"draining"`
	Pools      []poolView       `json:"pools"`
	Rejections map[string]int64 `json:"rejections"`
	Admission  AdmissionState   `json:"admission"`
}

func (h *handlers) liveState(w http.ResponseWriter, r *http.Request) {
	l := h.live()
	v := liveView{InFlight: l.InGate, Draining: l.Draining, Rejections: l.Rejections, Pools: []poolView{}, Admission: admissionState(l)}
	if a := l.Admission; a != nil {
		v.InFlight, v.Queued, v.Capacity = a.Running, a.Waiting, a.Capacity
	}
	for key, n := range l.Pools {
		parts := append(strings.SplitN(key, "/", 3), "", "")
		v.Pools = append(v.Pools, poolView{Runtime: parts[0], Network: parts[1], Variant: parts[2], Ready: n})
	}
	slices.SortFunc(v.Pools, func(a, b poolView) int {
		return strings.Compare(a.Runtime+"/"+a.Network+"/"+a.Variant, b.Runtime+"/"+b.Network+"/"+b.Variant)
	})
	writeJSON(w, http.StatusOK, v)
}

// runtimes is GET /console/api/runtimes: the service's description (the
// playground's runtimes and limits).
func (h *handlers) runtimes(w http.ResponseWriter, r *http.Request) {
	info, err := h.svc.Describe(r.Context())
	if err != nil {
		h.internal(w, "describe the runtimes", err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}
