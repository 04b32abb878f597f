package sandbox

import (
	"context"
	"errors"
	"io"
	"time"
)

// Backend creates sandboxes of one isolation kind.
type Backend interface {
	// Name is the isolation level's name, e.g. "namespaces".
	Name() string
	// Create prepares a sandbox ready to take one Job: namespaces, mounts and
	// limits are in place and no user code has run. The caller must call
	// Destroy on the result, whatever happens next.
	Create(ctx context.Context, cfg Config) (Sandbox, error)
	// Limitations lists, once, what this backend cannot enforce on this host
	// (empty when everything is enforced), as sentences for an operator.
	Limitations() []string
	// UnenforcedLimits lists the limits this backend cannot enforce on this
	// host (empty when it enforces them all): the engine notes them on every
	// result and front ends in their descriptions.
	UnenforcedLimits() []Limit
	// Close releases what the backend holds for its lifetime (its helper
	// processes, its cgroup parent, host mounts it pinned). Every sandbox
	// must have been destroyed first; no Create may follow.
	Close() error
}

// Emulation is implemented by backends whose sandboxes may run under
// software emulation (microvm without a usable KVM), so that the engine
// can say so to its callers.
type Emulation interface {
	// SoftwareEmulation reports whether sandboxes run under software
	// emulation: slow, for testing.
	SoftwareEmulation() bool
}

// Sandbox is one created sandbox. Run may be called at most once.
type Sandbox interface {
	// ID is the sandbox's unique name (also its cgroup's name).
	ID() string
	// Run runs job and returns what it did. Cancelling ctx kills everything in
	// the sandbox at once; Run then returns ctx's error.
	Run(ctx context.Context, job Job) (Outcome, error)
	// Destroy kills whatever is left and releases every resource. It reports
	// whether teardown verifiably finished.
	Destroy() Teardown
	// MemoryUsage is the memory the sandbox uses now, in bytes, everything
	// it holds counted (its processes, file systems, and for gVisor the
	// Sentry and gofer); 0 when the backend cannot tell. The warm pool keeps
	// its ready sandboxes within a budget with it.
	MemoryUsage() int64
}

// CPUMeter is implemented by sandboxes that can tell how much CPU their
// processes have asked for: admission tells a call that computes from one
// that waits by it.
type CPUMeter interface {
	// CPUDemand is the time the sandbox's live tasks have spent running
	// or waiting to run on a CPU so far (a task that computes demands all
	// of any interval, however many share the CPUs), and whether this
	// host counts it.
	CPUDemand() (time.Duration, bool)
}

// MemoryBudget is implemented by backends whose sandboxes all live under
// one parent cgroup (shared by every engine on the host that names it):
// the parent's memory limit is the machine's budget for all sandboxes,
// so that when they outgrow it together the kernel kills inside the
// parent, never the engine or the host, and the parent's usage is what an
// engine admits calls by.
type MemoryBudget interface {
	// SetMemoryBudget gives the parent a memory limit of bytes (swap
	// included). A backend that cannot (no memory controller) does
	// nothing and says so with ok false.
	SetMemoryBudget(bytes int64) (ok bool, err error)
	// MemoryInUse is what every sandbox under the parent uses now, every
	// engine's and warm ones included, as the kernel weighs it against
	// the limit (file cache it would reclaim first left out).
	MemoryInUse() int64
}

// Image is the read-only root file system a sandbox runs on.
type Image struct {
	// RootFS is the host directory holding the image's tree.
	RootFS string
	// UIDBase is the host uid that the image's uid 0 is owned by. A root
	// engine's sandbox does not run as these uids but sees them as its own
	// through an idmapped view (package idmap).
	UIDBase uint32
}

// Config fixes what a sandbox is created with.
type Config struct {
	Image Image
	// MemoryBytes is the initial memory limit (swap included); Job may lower or
	// raise it before the code starts.
	MemoryBytes int64
	// MaxPids caps processes and threads together (fork bombs stop here).
	MaxPids int64
	// CPUs caps CPU time in cores.
	CPUs float64
	// WritableBytes caps the RAM-backed writable layer over the image.
	WritableBytes int64
	// TmpBytes caps the RAM-backed /tmp.
	TmpBytes int64
	// MaxInodes caps the number of files in each writable file system.
	MaxInodes int64
	// Warm marks a sandbox built ahead of demand: the backend does all the
	// work it can before the job arrives (confinement included).
	Warm bool
	// Background builds the sandbox at a tenth of the normal CPU weight
	// (when it has a cgroup), so that it does not slow the calls being
	// served; the job runs at the normal weight.
	Background bool
	// Prestart, when set, is an interpreter started as soon as the sandbox is
	// built (already confined like user code) that waits for the job; see
	// Prestart.
	Prestart *Prestart
	// Network, when set, puts the sandbox in a prepared network namespace
	// (egress); nil gives it a new, empty one with only loopback.
	Network *Network
}

// Prestart describes an interpreter a warm sandbox starts ahead of the job.
// It reads its fd 3 to end of file, gets the job in the form
// initproto.PrestartJob writes, and then runs the program file as if started with the job's argv.
// It must not run anything of a caller's before the job arrives.
type Prestart struct {
	Argv []string
	Env  []string
	Dir  string
}

// ErrLimitBelowUsage is returned by Run, before anything of the job ran,
// when the job's memory limit is below what the sandbox already uses (a warm
// interpreter with heavy imports, say). The caller should use a fresh sandbox.
var ErrLimitBelowUsage = errors.New("the job's memory limit is below what the warm sandbox already uses")

// Network is a prepared network namespace a sandbox joins.
type Network struct {
	// NetNSFD is an open file descriptor of the namespace, valid until the
	// sandbox is destroyed.
	NetNSFD int
	// DNS are resolver addresses written to the sandbox's /etc/resolv.conf.
	DNS []string
}

// File is written into the sandbox before the job's command starts.
type File struct {
	Path string
	Data []byte
}

// Job is the one program a sandbox runs.
type Job struct {
	// Argv is the command line inside the sandbox; Argv[0] is an absolute path.
	Argv []string
	// Env is the complete environment, as KEY=value strings.
	Env []string
	// Dir is the working directory inside the sandbox.
	Dir string
	// Files are written (with their parent directories) before Argv starts.
	Files []File
	// ReturnFiles are read after the program ends, never following a link out
	// of the sandbox.
	ReturnFiles []string
	// MaxReturnBytes caps the total size of returned files.
	MaxReturnBytes int64
	// Timeout is the wall-clock limit after which everything is killed.
	Timeout time.Duration
	// MemoryBytes, when non-zero, replaces the Config's memory limit.
	MemoryBytes int64
	// Stdout and Stderr receive the program's output as it is produced.
	// The backend does not cap them; the caller's writers do.
	Stdout, Stderr io.Writer
}

// Outcome is what a job did.
type Outcome struct {
	// ExitCode is the exit status of the job's main process (0..255), or
	// 128+Signal when a signal ended it.
	ExitCode int
	// Signal is the signal that ended the main process, 0 if it exited.
	Signal int
	// TimedOut is true when the wall-clock limit killed the job.
	TimedOut bool
	// OOMKilled is true when the memory limit made the kernel kill a process.
	OOMKilled bool
	// MachineOOMKilled is true when the kernel killed a process within the
	// sandbox's own memory limit, because the sandboxes together had used
	// up the memory the machine gives them (see MemoryBudget).
	MachineOOMKilled bool
	// PidsLimitHit is true when the limit on processes and threads
	// (Config.MaxPids) refused a fork or clone.
	PidsLimitHit bool
	// ForkFailures counts the fork and clone calls that limit refused; 0
	// when the backend cannot count them (gVisor's Sentry keeps no count).
	ForkFailures int64
	// Duration is the time the main process ran.
	Duration time.Duration
	// Files holds the return files that existed and fit.
	Files map[string][]byte
	// Notes say, one sentence each, why a return file is missing or what else
	// the caller must know.
	Notes []string
}

// Teardown reports how destroying a sandbox went.
type Teardown struct {
	// Purged is true only when no process, mount, cgroup or namespace of the
	// sandbox is left.
	Purged bool
	// Err says what was left, when Purged is false.
	Err error
}
