package httpapi

import (
	"net/http"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// ConsoleCaller is the caller of the runs the web console's playground
// starts (package console): its usage rows and refusals are recorded under
// it in place of a key id. It is a label only: what spares those runs every
// key's limits (the operator signed in; the queue and the sandbox slots
// still apply) is the face of the gate the console is given (Config.Console),
// not this name, which a call through Server.Service is refused for as for
// any name that is no key. Key ids start with "key_", so it names no key.
const ConsoleCaller = "console"

// consoleOff answers /console when the server has no console.
func consoleOff() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, CodeNotFound, "the web console is off: start `scratchrun serve` with "+
			"--console-token TOKEN (or SCRATCHRUN_CONSOLE_TOKEN), at least 16 characters, to turn it on")
	})
}

// Live is what the server is doing at one moment, read from the same
// sources as its /metrics (the admission collector, scratchrun_draining,
// _pool_size and _rejections_total), for the console.
type Live struct {
	// InGate counts the calls in the gate: waiting for admission or
	// running.
	InGate int
	// Admission is how the service's admission stands (nil when the service
	// has none of its own, a remote one).
	Admission *execapi.AdmissionInfo
	Draining  bool
	// Pools counts the warm sandboxes ready per pool key (nil when the
	// service keeps no pool).
	Pools map[execapi.PoolKey]int
	// Rejections counts the requests refused before they ran since the
	// server started, by reason.
	Rejections map[string]int64
}

// Live reports what the server is doing now.
func (s *Server) Live() Live {
	l := Live{InGate: s.gate.calls.count(), Draining: s.drain.isDraining(), Rejections: s.m.rejections.counts()}
	if r, ok := s.cfg.Service.(admissionReporter); ok {
		info := r.Admission()
		l.Admission = &info
	}
	if ps, ok := s.cfg.Service.(poolStatser); ok {
		l.Pools = ps.PoolStats()
	}
	return l
}
