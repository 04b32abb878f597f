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
	// Version is the scratchrun version of the server that describes
	// itself (buildinfo): a worker's in its registration, the answering
	// server's in /v1/runtimes.
	Version string `json:"version,omitempty"`
	// WorkerVersions are, from a cluster's front end, the versions its
	// live workers registered with, each once, sorted: more than one
	// while an upgrade rolls through the fleet.
	WorkerVersions []string      `json:"worker_versions,omitempty"`
	Runtimes       []RuntimeInfo `json:"runtimes"`
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
	// Admission says how the executor decides whether a call may start
	// now, as it stood when it described itself; nil from an executor
	// that has no admission of its own (a fake, an older server).
	Admission *AdmissionInfo `json:"admission,omitempty"`
	// SoftwareEmulation is true when the isolation level's virtual
	// machines run under software emulation (microvm on a host without a
	// usable KVM): EmulationWarning.
	SoftwareEmulation bool `json:"software_emulation,omitempty"`
	// Sessions describes the sessions the executor offers; nil (absent)
	// when it offers none.
	Sessions *SessionsInfo `json:"sessions,omitempty"`
}

// AdmissionInfo is an executor's admission at one moment: what it measured,
// what it holds to, and what it refused. A call starts while the calls
// running are below Capacity, the memory reserved plus one more call's
// floor fits MemoryBudgetBytes, the CPUs are not saturated (CPUPressure
// below CPUThreshold, and few enough calls computing) and not too many
// calls are starting at once; otherwise it waits (up to QueueWaitMS,
// behind at most MaxQueue others) and is then refused.
type AdmissionInfo struct {
	// Running counts the calls admitted and not yet ended; Starting those
	// of them whose sandbox the gauges cannot see yet; CPUBound those seen
	// computing (their sandboxes demand a CPU); Waiting the calls queued
	// for room.
	Running  int `json:"running"`
	Starting int `json:"starting"`
	CPUBound int `json:"cpu_bound"`
	Waiting  int `json:"waiting"`
	// Free is how many more calls it would admit now, as the gauges
	// stand: what a worker of a cluster publishes as its free sandboxes.
	Free int `json:"free"`
	// Capacity is the upper bound on calls running at once (the
	// operator's, else a safety maximum), whatever the gauges say.
	Capacity int `json:"capacity"`
	// MaxQueue bounds the calls waiting; QueueWaitMS how long each waits
	// (0: as long as the caller does).
	MaxQueue    int   `json:"max_queue"`
	QueueWaitMS int64 `json:"queue_wait_ms"`
	// MemoryBudgetBytes is the memory all sandboxes may use together (0:
	// no memory condition); MemoryUsedBytes what they use now, measured;
	// MemoryReservedBytes that plus CallFloorBytes for each call whose
	// sandbox is not measured yet.
	MemoryBudgetBytes   int64 `json:"memory_budget_bytes"`
	MemoryUsedBytes     int64 `json:"memory_used_bytes"`
	MemoryReservedBytes int64 `json:"memory_reserved_bytes"`
	CallFloorBytes      int64 `json:"call_floor_bytes"`
	// CPUPressure is the share of the last short window in which some
	// runnable task waited for a CPU (0 to 1), from CPUGauge ("psi":
	// /proc/pressure/cpu; "run_queue": /proc/loadavg's running count);
	// CPUThreshold is where admission stops (0: no CPU condition).
	CPUPressure  float64 `json:"cpu_pressure"`
	CPUThreshold float64 `json:"cpu_threshold"`
	CPUGauge     string  `json:"cpu_gauge"`
	// Rejections counts the calls refused since start, by reason (the
	// reasons of execapi.AdmissionRefusals, every one present).
	Rejections map[RefusalReason]int64 `json:"rejections"`
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
