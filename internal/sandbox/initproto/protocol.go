package initproto

import (
	"fmt"
	"time"
)

// ProtocolVersion is the version of the messages below and their binary
// form. The engine sends it first in every SetupMessage, and both inits
// refuse a setup of another version with a ReadyMessage saying so: an init
// from another build (an old scratchrun-spawn or scratchrun-init left next
// to a new engine) would otherwise misread every field after the first
// change. Raise it with any change to a message or its encoding.
const ProtocolVersion = 3

// File descriptors init inherits besides stdin/stdout/stderr (which are
// /dev/null and the sandbox's output pipes).
const (
	// ControlFD carries engine -> init: SetupMessage, then JobMessage (or,
	// in a session, Requests until end of file).
	ControlFD = 3
	// StatusFD carries init -> engine: ReadyMessage, then ResultMessage.
	StatusFD = 4
	// UpperFD is, in a session's init, an O_PATH descriptor of its
	// overlay's upper directory (the root's writable layer), kept open so
	// that the engine can copy that layer (a fork: /proc/<init>/fd/5)
	// though the directory is out of every path's reach after pivot_root.
	UpperFD = 5
)

// MaxJobBytes bounds a job message (input files included) as init reads it.
const MaxJobBytes = 1 << 30

// MaxSetupBytes bounds a setup message (init refuses larger ones).
const MaxSetupBytes = 4 << 20

// VersionError is a setup message of another ProtocolVersion.
type VersionError struct{ Got uint64 }

func (e *VersionError) Error() string {
	return fmt.Sprintf("the engine speaks init protocol version %d and this init version %d: "+
		"install scratchrun, scratchrun-init and scratchrun-spawn from one build (scripts/install.sh)", e.Got, ProtocolVersion)
}

// The messages below travel in the binary form of wire.go.

// SetupMessage tells init how to build the sandbox's file system.
type SetupMessage struct {
	RootFS        string
	MountDir      string
	WritableBytes int64
	TmpBytes      int64
	MaxInodes     int64
	Hostname      string
	// MapsGroups is false when only one gid is mapped (unprivileged engine),
	// so devpts cannot be given the tty group.
	MapsGroups bool
	// CopyHome makes /root a private, writable copy of the image's /root.
	// An unprivileged engine needs it: the sandbox's root is then the user's
	// own uid, and the image's /root belongs to a uid its user namespace does
	// not map, so HOME would be read-only (and, mode 0700, unreadable).
	CopyHome bool
	// JoinedNetwork is true when init starts in a prepared network namespace
	// (egress), which the engine has already configured.
	JoinedNetwork bool
	// DNS are resolvers for /etc/resolv.conf (egress only).
	DNS []string
	// MaskPaths and ReadOnlyPaths are the /proc paths init hides and
	// freezes (MaskedPaths and ReadOnlyPaths, normally).
	MaskPaths, ReadOnlyPaths []string
	// Seccomp is the compiled filter init installs before any user code
	// (compiled once by the engine, so init carries no profile compiler),
	// packed by bpfload.Encode.
	Seccomp []byte
	// KeepCapabilities are the capabilities user code keeps in its bounding
	// set; every other one is dropped.
	KeepCapabilities []uintptr
	// LockDownEarly confines init right after building the sandbox rather
	// than when the job arrives (warm sandboxes: the work leaves the call's
	// critical path). A Prestart implies it.
	LockDownEarly bool
	// Prestart, when set, is an interpreter init starts (locked down, as
	// user code) right away; the job is later handed to it on its fd 3.
	Prestart *PrestartSpec
	// UserNamespaceLimits are written to /proc/sys/user in the sandbox's
	// own user namespace, and Rlimits set (soft and hard alike), before
	// anything else runs in the sandbox: they bound the kernel objects
	// that are counted per user, not per cgroup (see KernelLimits). The
	// namespaces backend's init applies them; gVisor's Sentry implements
	// those objects itself, so its engine sends none and its init refuses
	// them.
	UserNamespaceLimits []Setting
	Rlimits             []Rlimit
	// Session makes init run jobs one after another, each a Request on
	// the control pipe that stays open (see Request), rather than one.
	Session bool
}

// Setting is one /proc/sys/user file (Name, e.g. "max_inotify_instances")
// and the value written to it.
type Setting struct {
	Name  string
	Value uint64
}

// Rlimit is a resource limit (Resource is RLIMIT_*) set soft and hard.
type Rlimit struct {
	Resource int
	Value    uint64
}

// PrestartSpec is the command line of a pre-started interpreter.
type PrestartSpec struct {
	Argv []string
	Env  []string
	Dir  string
}

// ReadyMessage answers SetupMessage.
type ReadyMessage struct {
	Ready bool
	Error string
}

// JobFile is one input file.
type JobFile struct {
	Path string
	Data []byte
}

// JobMessage is the one job a sandbox runs.
type JobMessage struct {
	Argv           []string
	Env            []string
	Dir            string
	Files          []JobFile
	ReturnFiles    []string
	MaxReturnBytes int64
	Timeout        time.Duration
	// Resident, in a session only, hands the job to a kernel init keeps
	// (see ResidentJob): Argv is then not run.
	Resident *ResidentJob
}

// ResultMessage answers JobMessage.
type ResultMessage struct {
	Started  bool
	ExitCode int
	Signal   int
	TimedOut bool
	// ProcessLimitHit is true when the sandbox's processes and threads
	// filled the process limit while the program ran (gVisor's init only:
	// the Sentry refuses forks over RLIMIT_NPROC and counts none, so init
	// watches; a namespaces sandbox's cgroup counts every refusal).
	ProcessLimitHit bool
	// Separated is true, in a session, when the job's processes were kept
	// apart from the session's: their keeper held them to the job's end,
	// or the timeout (or a cancel) killed them all within SeparateWithin.
	// False means they could not be told apart (they outlived the kill,
	// or the job killed its own keeper), and the session must end.
	Separated bool
	// Left counts, in a session, the job's processes still running when
	// its main process ended (background processes, which live on).
	Left uint64
	// ResidentStarted and ResidentLost are a resident job's
	// (JobMessage.Resident): its kernel was started for it, and its
	// kernel is gone after it (it ended, broke its reply frame, or had to
	// be killed at a timeout or cancel).
	ResidentStarted bool
	ResidentLost    bool
	Duration        time.Duration
	Files           map[string][]byte
	Notes           []string
	Error           string
}
