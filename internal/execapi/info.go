package execapi

import "context"

// RuntimeInfo describes one installed runtime, for tool descriptions and
// GET /v1/runtimes.
type RuntimeInfo struct {
	Name      string   `json:"name"`
	Version   string   `json:"version"`
	Image     string   `json:"image"`
	Libraries []string `json:"libraries"`
}

// Info describes what an executor offers: its runtimes, isolation, network
// policy and limits. Front ends build tool schemas and descriptions from it,
// so they never promise what the executor cannot do.
type Info struct {
	Runtimes []RuntimeInfo `json:"runtimes"`
	// Isolation names the sandbox backend, e.g. "namespaces".
	Isolation string `json:"isolation"`
	// NetworkDefault is the network mode a request gets when it names none.
	NetworkDefault string `json:"network_default"`
	// EgressAllowed says whether a request may ask for network "egress".
	EgressAllowed    bool `json:"egress_allowed"`
	DefaultTimeoutMS int  `json:"default_timeout_ms"`
	MinTimeoutMS     int  `json:"min_timeout_ms"`
	MaxTimeoutMS     int  `json:"max_timeout_ms"`
	DefaultMemoryMB  int  `json:"default_memory_mb"`
	MinMemoryMB      int  `json:"min_memory_mb"`
	MaxMemoryMB      int  `json:"max_memory_mb"`
	// OutputLimitBytes caps stdout and stderr, each.
	OutputLimitBytes int `json:"output_limit_bytes"`
	// MaxReturnBytes caps all return files of one run together.
	MaxReturnBytes int64 `json:"max_return_bytes"`
	// UnenforcedLimits names the limits this host cannot enforce ("memory",
	// "processes", "cpu"; empty when all are): an ordinary user without a
	// delegated cgroup, say. Every result's note says so too.
	UnenforcedLimits []string `json:"unenforced_limits"`
	// SoftwareEmulation is true when the isolation level's virtual
	// machines run under software emulation (microvm on a host without a
	// usable KVM): EmulationWarning.
	SoftwareEmulation bool `json:"software_emulation,omitempty"`
}

// EmulationWarning is what a front end says of an Info with
// SoftwareEmulation.
const EmulationWarning = "software emulation: slow; for testing"

// Service is an Executor that can also describe itself. The local engine and
// the HTTP client of a remote server both are one.
type Service interface {
	Executor
	Describe(ctx context.Context) (Info, error)
}
