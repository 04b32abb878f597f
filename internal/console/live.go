package console

import (
	"cmp"
	"maps"
	"net/http"
	"slices"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
)

// AdmissionState is how admission decides, as the Live page shows it: the
// engine's admission by resources as it describes itself
// (execapi.AdmissionInfo, the same fields and JSON names), with the mode
// it adds; for a service with no admission of its own (a remote one), only
// the calls the server has in flight.
type AdmissionState struct {
	// Mode is "resources" (memory and CPU measured) or "none" (the service
	// admits calls itself, out of this server's sight).
	Mode string `json:"mode"`
	execapi.AdmissionInfo
}

// Admission modes.
const (
	ModeResources = "resources"
	ModeNone      = "none"
)

// admissionState is the Live page's view of l's admission.
func admissionState(l httpapi.Live) AdmissionState {
	if l.Admission == nil {
		return AdmissionState{Mode: ModeNone, AdmissionInfo: execapi.AdmissionInfo{
			Running: l.InGate, Rejections: map[execapi.RefusalReason]int64{}}}
	}
	st := AdmissionState{Mode: ModeResources, AdmissionInfo: *l.Admission}
	// A copy: the page's map must not be the live one's.
	st.Rejections = maps.Clone(l.Admission.Rejections)
	if st.Rejections == nil {
		st.Rejections = map[execapi.RefusalReason]int64{}
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
		v.Pools = append(v.Pools, poolView{Runtime: key.Runtime, Network: key.Network, Variant: key.Variant, Ready: n})
	}
	slices.SortFunc(v.Pools, func(a, b poolView) int {
		return cmp.Or(cmp.Compare(a.Runtime, b.Runtime), cmp.Compare(a.Network, b.Network), cmp.Compare(a.Variant, b.Variant))
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
