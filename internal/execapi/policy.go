package execapi

import "time"

// Policy holds the operator's defaults and maxima that validation applies.
// The zero value is not useful; start from DefaultPolicy.
type Policy struct {
	DefaultTimeout time.Duration
	MaxTimeout     time.Duration
	// MinTimeout is the shortest timeout a caller may ask for (the hosted
	// tool's minimum, so that a request valid here is valid there).
	MinTimeout      time.Duration
	DefaultMemoryMB int
	MaxMemoryMB     int
	// MinMemoryMB keeps a caller from asking for a limit no interpreter
	// starts in (the hosted tool's minimum).
	MinMemoryMB int
	// MaxCodeBytes bounds Code.
	MaxCodeBytes int
	// MaxFiles bounds len(Files)+len(FilesBase64); MaxFileBytes their decoded total.
	MaxFiles     int
	MaxFileBytes int
	// MaxReturnFiles bounds len(ReturnFiles).
	MaxReturnFiles int
	// MaxEnv bounds the number of Env entries; MaxEnvBytes their total size.
	MaxEnv      int
	MaxEnvBytes int
	// NetworkDefault is the mode a request without "network" gets.
	NetworkDefault string
	// AllowEgress lets requests ask for NetworkEgress.
	AllowEgress bool
}

// DefaultPolicy is the contract's documented defaults, the hosted tool's:
// timeout 10 s (1 s to 30 s), memory 256 MB (64 MB to 512 MB).
func DefaultPolicy() Policy {
	return Policy{
		DefaultTimeout:  10 * time.Second,
		MaxTimeout:      30 * time.Second,
		MinTimeout:      time.Second,
		DefaultMemoryMB: 256,
		MaxMemoryMB:     512,
		MinMemoryMB:     64,
		MaxCodeBytes:    1 << 20,
		MaxFiles:        100,
		MaxFileBytes:    8 << 20,
		MaxReturnFiles:  20,
		MaxEnv:          100,
		MaxEnvBytes:     64 << 10,
		NetworkDefault:  NetworkNone,
	}
}

// Info is what p promises callers, as every Service describes it: the
// network default, whether egress may be asked for, and each limit's
// default and range. The rest of Info (runtimes, isolation, output caps,
// admission) is the executor's own to fill in.
func (p Policy) Info() Info {
	return Info{
		NetworkDefault:   p.NetworkDefault,
		EgressAllowed:    p.AllowEgress,
		DefaultTimeoutMS: int(p.DefaultTimeout.Milliseconds()),
		MinTimeoutMS:     int(p.MinTimeout.Milliseconds()),
		MaxTimeoutMS:     int(p.MaxTimeout.Milliseconds()),
		DefaultMemoryMB:  p.DefaultMemoryMB,
		MinMemoryMB:      p.MinMemoryMB,
		MaxMemoryMB:      p.MaxMemoryMB,
	}
}
