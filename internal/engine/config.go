package engine

import (
	"log/slog"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
)

// Config is the operator's configuration of the local engine.
type Config struct {
	// Policy holds request defaults and maxima (timeouts, memory, sizes).
	Policy execapi.Policy
	// Admission decides when a call may start: by the memory sandboxes
	// use against a budget (given to their cgroup parent as its limit), by
	// CPU pressure, and by an upper bound on calls running; a call that
	// cannot start waits in a fair queue and is then refused. The zero
	// value admits by count alone (admission.HardCapacity) and lets a call
	// wait as long as its context allows; servers use admission.Defaults.
	Admission admission.Settings
	// OutputLimitBytes caps stdout and stderr, each.
	OutputLimitBytes int
	// MaxReturnBytes caps all return files of one run together.
	MaxReturnBytes int64
	// MaxPids caps processes and threads in one sandbox.
	MaxPids int64
	// CPUs caps one sandbox's CPU time, in cores.
	CPUs float64
	// WritableBytes caps the RAM-backed layer over the image; TmpBytes /tmp and
	// /dev/shm; MaxInodes the files in each.
	WritableBytes int64
	TmpBytes      int64
	MaxInodes     int64
	// PassHostEnv names host variables copied into every sandbox when set.
	// The default passes OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE: on CPUs that
	// older OpenBLAS builds misdetect, hosts set them so numpy neither crashes
	// nor computes wrong results.
	PassHostEnv []string
	// Pool sizes the warm pool; the zero value (Floor 0) disables it, as
	// one-shot CLI runs want.
	Pool PoolConfig
	// Network provides egress slots; it must be set when Policy.AllowEgress.
	Network *netpolicy.Manager
	// Logger receives operational logs; never request env values or code.
	Logger *slog.Logger
	// Zygote makes the warm Python sandboxes a call of catalog images
	// with network none would take from the pool from a zygote of the
	// caller's instead (sandbox.Config.Zygote; docs/zygotes.md), on the
	// call's path: a level without zygotes makes an ordinary one.
	Zygote bool
	// Sessions configures the sessions the engine holds (SessionService);
	// the zero value has them off, and the engine refuses every session
	// call (SessionPolicy().Enabled false says so to front ends).
	Sessions SessionsConfig
}

// SessionsConfig is what the engine holds its sessions to.
type SessionsConfig struct {
	// Policy is the operator's bounds (Enabled turns sessions on).
	Policy execapi.SessionPolicy
	// Interrupt is how long a kernel has to answer the SIGINT of a
	// timeout before it is killed and restarted (default 2s).
	Interrupt time.Duration
	// Sweep is how often idle TTLs, lifetimes and lost sandboxes are
	// looked at (default 1s).
	Sweep time.Duration
	// Tombstones bounds how many ended sessions are remembered, so that
	// their owners learn why (default 4096); each is kept for
	// Policy.MaxLifetime plus an hour at most.
	Tombstones int
}

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		Policy:           execapi.DefaultPolicy(),
		OutputLimitBytes: 1 << 20,
		MaxReturnBytes:   10 << 20,
		MaxPids:          256,
		CPUs:             1,
		WritableBytes:    128 << 20,
		TmpBytes:         128 << 20,
		MaxInodes:        65536,
		PassHostEnv:      []string{"OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"},
	}
}
