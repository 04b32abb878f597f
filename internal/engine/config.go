package engine

import (
	"log/slog"
	"runtime"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
)

// Config is the operator's configuration of the local engine.
type Config struct {
	// Policy holds request defaults and maxima (timeouts, memory, sizes).
	Policy execapi.Policy
	// MaxConcurrent is how many sandboxes may run at once; 0 picks a default
	// from cores and memory (DefaultMaxConcurrent).
	MaxConcurrent int
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

// DefaultMaxConcurrent sizes capacity from the machine: two sandboxes per core
// (interpreters mostly wait on I/O and start-up), but never more than memory
// holds at the maximum per-run memory limit.
func DefaultMaxConcurrent(totalMemoryBytes int64, maxMemoryMB int) int {
	n := 2 * runtime.NumCPU()
	if maxMemoryMB > 0 && totalMemoryBytes > 0 {
		byMemory := int(totalMemoryBytes / 2 / (int64(maxMemoryMB) << 20))
		if byMemory < n {
			n = byMemory
		}
	}
	if n < 1 {
		n = 1
	}
	return n
}
