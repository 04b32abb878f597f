package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Registration is what a worker publishes about itself, every heartbeat,
// under its id in the registry: who it is, what its engine describes of
// itself (execapi.Info: the runtimes it offers, its isolation, its caps,
// and its admission as it stands now), and the aliases it resolves. Front
// ends place by it; the worker still decides each call.
type Registration struct {
	// ID names the worker; Instance changes each time its process starts,
	// so a front end tells a restarted worker from the one it handed a
	// call to.
	ID       string `json:"id"`
	Instance string `json:"instance"`
	// Info is its engine's description, its runtimes cut to those the
	// worker offers, its Admission always set (what it would admit now
	// is what placement goes by) and its Version the worker's scratchrun
	// version. On the wire its fields sit beside the registration's own.
	execapi.Info
	// Aliases are the aliases it resolves (alias -> runtime), if any.
	Aliases map[string]string `json:"aliases,omitempty"`
	// Sessions says the worker holds sessions (its engine's are on):
	// front ends open them only on such workers.
	Sessions bool `json:"sessions,omitempty"`
	// Draining is set on the last registration of a worker that stops:
	// it takes no new calls, and EndedSessions says which of its sessions
	// it ended.
	Draining bool `json:"draining,omitempty"`
	// EndedSessions are the sessions the worker ended as it stopped (at
	// most MaxEndedSessions), so that their next call is told.
	EndedSessions []EndedSession `json:"ended_sessions,omitempty"`
	// Heartbeat is when it published this, by its own clock (for people:
	// front ends judge liveness by when they heard it).
	Heartbeat time.Time `json:"heartbeat"`
}

// Offers reports whether the worker runs runtime, by name or by alias.
func (r Registration) Offers(runtime string) bool {
	if _, ok := r.Aliases[runtime]; ok {
		return true
	}
	return slices.ContainsFunc(r.Runtimes, func(rt execapi.RuntimeInfo) bool { return rt.Name == runtime })
}

// Free is how many more calls the worker's admission would start now (0
// when it said nothing of its admission).
func (r Registration) Free() int {
	if r.Admission == nil {
		return 0
	}
	return r.Admission.Free
}

// Running is how many calls the worker runs now, by its admission.
func (r Registration) Running() int {
	if r.Admission == nil {
		return 0
	}
	return r.Admission.Running
}

// DecodeRegistration reads a registration published under key, refusing
// one that names another worker than its key (the registry's keys are
// what the permissions guard).
func DecodeRegistration(key string, data []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(data, &r); err != nil {
		return Registration{}, fmt.Errorf("registration of %s: %w", key, err)
	}
	if len(r.EndedSessions) > MaxEndedSessions {
		return Registration{}, fmt.Errorf("registration of %s lists %d ended sessions, more than %d", key, len(r.EndedSessions), MaxEndedSessions)
	}
	if r.ID != key {
		return Registration{}, fmt.Errorf("registration under %s names worker %q", key, r.ID)
	}
	return r, nil
}
