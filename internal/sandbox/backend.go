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

// Sandbox is one created sandbox. Run may be called at most once; a
// sandbox created with Config.Session refuses it and runs its jobs with
// Session.RunNext instead.
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

// Session is implemented by sandboxes created with Config.Session, which
// run jobs one after another and live until Destroy: what a job leaves
// (files, background processes) stays for the next. The engine finds it
// with SandboxAs. Its methods must not be called concurrently.
type Session interface {
	// RunNext runs one more job. A job that times out, or whose ctx ends,
	// has its own processes killed and no others (Outcome.Separated says
	// whether that was possible); cancelling ctx makes RunNext return
	// ctx's error once the job's processes are gone. The sandbox lives on
	// unless Outcome.Ended (or an error) says otherwise.
	RunNext(ctx context.Context, job Job) (Outcome, error)
	// ReadFile reads one regular file of the sandbox (at most max bytes) as
	// a return file is read: never through a link out of the sandbox's
	// tree, never a kernel pseudo-file.
	ReadFile(ctx context.Context, path string, max int64) ([]byte, error)
	// WriteFile writes one file with its missing parents, as input files
	// are, with the same care as ReadFile: what user code left in its
	// place (a link, a fifo) is refused, not followed.
	WriteFile(ctx context.Context, path string, data []byte) error
	// Alive reports whether the sandbox can still run jobs: its init runs
	// and no job ended the session.
	Alive() bool
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
	// Session makes a sandbox that runs jobs one after another (Session)
	// rather than one Run: what a job leaves stays until Destroy. It
	// cannot be combined with Prestart. Every level honours it today
	// (namespaces, gVisor, microVM); the caller still finds Session with
	// SandboxAs on what Create returned, so that a backend without it
	// gives a plain sandbox, not a broken session. Forker says whether a
	// session can be copied (namespaces: its files; microVM: its memory).
	Session bool
	// Zygote, when set with Prestart, asks for the pre-started interpreter
	// to be a fork of an initialized one (docs/zygotes.md) rather than a
	// new program. A level without zygotes, or one that cannot use a
	// zygote for this sandbox, ignores it: the sandbox is the same either
	// way to its code.
	Zygote *Zygote
}

// ZygoteMaker is a Backend that honours Config.Zygote (the namespaces
// level as root).
type ZygoteMaker interface {
	// MakesZygotes reports whether it makes sandboxes from zygotes.
	MakesZygotes() bool
	// RetireZygotes retires every zygote now (later sandboxes start new
	// ones) and returns once they and their sandboxes are gone: an engine
	// that closes leaves none of its callers' behind, on a backend it
	// shares too.
	RetireZygotes()
}

// Zygote names the zygote a sandbox's interpreter is forked from (one per
// caller, runtime and variant: a zygote never serves two callers, whose
// calls would share its hash seed and address layout) and how to start it.
type Zygote struct {
	Caller, Runtime, Variant string
	// Argv and Env start the zygote's interpreter (warm.Zygote's command
	// line, the variant's preloads in Env): one key always comes with the
	// same.
	Argv, Env []string
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

// ErrSessionEnded is returned by a Session's methods once the session can
// run nothing more (an earlier Outcome said Ended, or its init is gone).
var ErrSessionEnded = errors.New("the session has ended")

// ErrNotStarted is what Run's or RunNext's error unwraps to when the
// sandbox could not start the job (a command it cannot run, an input file
// it could not write): nothing of the job ran, and a session goes on.
var ErrNotStarted = errors.New("sandbox could not start the program")

// ErrFileRefused is what a Session's ReadFile or WriteFile error unwraps
// to when the sandbox refused that path (no such file, not a regular file,
// a link out of its tree) and the session itself is fine.
var ErrFileRefused = errors.New("the sandbox refused the file")

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
	// Resident, in a session only (Session.RunNext), hands the job to a
	// kernel the session keeps (see Resident) instead of running Argv.
	Resident *Resident
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

	// The fields below are a session's (Session.RunNext); zero otherwise.

	// Separated is true when the job's processes were kept apart from the
	// session's: its timeout or cancel, if any, killed them and nothing
	// else.
	Separated bool
	// Ended is true when the session can run no more jobs: the memory
	// limit killed a process (memory is the session's, whichever job's
	// process it was), the job's processes could not be separated, or
	// init is gone. The caller should Destroy the sandbox.
	Ended bool
	// Left counts the job's processes still running after its main
	// process ended (background processes, which live on).
	Left int
	// BetweenCallsBytes counts the output the session's processes wrote
	// since the previous job ended: no call was there to take it, so it
	// was dropped.
	BetweenCallsBytes int64
	// ResidentStarted is true when the job's kernel (Job.Resident) was
	// started for it: none of its Key ran before.
	ResidentStarted bool
	// ResidentLost is true when the job's kernel is gone after it (it
	// exited, broke its frame, or a timeout or cancel had to kill it): the
	// next job of its Key starts a fresh one.
	ResidentLost bool
}

// Teardown reports how destroying a sandbox went.
type Teardown struct {
	// Purged is true only when no process, mount, cgroup or namespace of the
	// sandbox is left.
	Purged bool
	// Err says what was left, when Purged is false.
	Err error
}

// Resident names an interpreter a session keeps running between its jobs
// (a kernel, package engine/kernel): a job with Resident set is handed to
// the kernel of that Key instead of starting Argv, and the kernel is
// started first (Argv, Env, Dir, confined as user code is) when none of
// that Key runs. The kernel reads the job's cell frames on its fd 3 and
// answers on its fd 4 (kernel.Request, kernel.Reply); it writes its output
// to the sandbox's stdout and stderr as any job does.
type Resident struct {
	// Key tells kernels apart: one per runtime of the session.
	Key string
	// Argv, Env and Dir start the kernel.
	Argv []string
	Env  []string
	Dir  string
	// Request is the cell frame written to the kernel's fd 3 for this job
	// (kernel.Request): the job's own Argv is not run.
	Request []byte
	// Interrupt is how long a kernel has to answer after the SIGINT a
	// timeout or cancel sends it, before it is killed (with its processes)
	// and counts as lost.
	Interrupt time.Duration
}

// Forker is implemented by session sandboxes that can be copied while no
// job runs in them. ForkKind says what a copy holds; Fork creates a new
// session sandbox with cfg (whose Session is set) that has this one's files
// (ForkKind "files": its processes and kernels start afresh) or its files
// and memory (ForkKind "memory": its processes go on where they were).
type Forker interface {
	// ForkKind is "files" or "memory" (execapi.ForkFiles, ForkMemory).
	ForkKind() string
	// Fork copies the sandbox into a new one created with cfg.
	Fork(ctx context.Context, cfg Config) (Sandbox, error)
}
