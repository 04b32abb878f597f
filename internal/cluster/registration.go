package cluster

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Registration is what a worker publishes about itself, every heartbeat,
// under its id in the registry: who it is, what it runs, and what its
// engine's admission would admit now. Front ends place by it; the worker
// still decides each call.
type Registration struct {
	// ID names the worker; Instance changes each time its process starts,
	// so a front end tells a restarted worker from the one it handed a
	// call to.
	ID       string `json:"id"`
	Instance string `json:"instance"`
	// Version is the worker's scratchrun version.
	Version string `json:"version"`
	// Runtimes are the runtimes it offers, with versions; Aliases the
	// aliases it resolves (alias -> runtime), if any.
	Runtimes []execapi.RuntimeInfo `json:"runtimes"`
	Aliases  map[string]string     `json:"aliases,omitempty"`
	// Isolation is its sandbox backend; EgressAllowed whether its
	// operator lets calls ask for egress.
	Isolation     string `json:"isolation"`
	EgressAllowed bool   `json:"egress_allowed"`
	// SoftwareEmulation says its isolation level's virtual machines run
	// under software emulation (slow; for testing).
	SoftwareEmulation bool `json:"software_emulation,omitempty"`
	// UnenforcedLimits are the limits its host cannot enforce.
	UnenforcedLimits []string `json:"unenforced_limits"`
	// OutputLimitBytes and MaxReturnBytes are its caps on output and on
	// return files.
	OutputLimitBytes int   `json:"output_limit_bytes"`
	MaxReturnBytes   int64 `json:"max_return_bytes"`
	// Free is how many more calls its admission would start now; Running
	// how many it runs; Capacity its upper bound whatever the gauges say.
	Free     int `json:"free"`
	Running  int `json:"running"`
	Capacity int `json:"capacity"`
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

// DecodeRegistration reads a registration published under key, refusing
// one that names another worker than its key (the registry's keys are
// what the permissions guard).
func DecodeRegistration(key string, data []byte) (Registration, error) {
	var r Registration
	if err := json.Unmarshal(data, &r); err != nil {
		return Registration{}, fmt.Errorf("registration of %s: %w", key, err)
	}
	if r.ID != key {
		return Registration{}, fmt.Errorf("registration under %s names worker %q", key, r.ID)
	}
	return r, nil
}
