package nsinit

import (
	"time"
)

// Arg0 is argv[0] of a re-executed binary that must act as sandbox init.
// A plain argv[0] (not a subcommand) keeps the CLI's namespace clean and lets
// test binaries act as init too.
const Arg0 = "scratchrun-sandbox-init"

// File descriptors init inherits besides stdin/stdout/stderr.
const (
	controlFD = 3 // engine -> init: SetupMessage, then JobMessage
	statusFD  = 4 // init -> engine: ReadyMessage, then ResultMessage
)

// SetupMessage tells init how to build the sandbox's file system.
type SetupMessage struct {
	RootFS        string `json:"rootfs"`
	MountDir      string `json:"mount_dir"`
	WritableBytes int64  `json:"writable_bytes"`
	TmpBytes      int64  `json:"tmp_bytes"`
	MaxInodes     int64  `json:"max_inodes"`
	Hostname      string `json:"hostname"`
	// MapsGroups is false when only one gid is mapped (unprivileged engine),
	// so devpts cannot be given the tty group.
	MapsGroups bool `json:"maps_groups"`
	// JoinedNetwork is true when init starts in a prepared network namespace
	// (egress), which the engine has already configured.
	JoinedNetwork bool `json:"joined_network"`
	// DNS are resolvers for /etc/resolv.conf (egress only).
	DNS []string `json:"dns"`
	// Seccomp is the compiled filter init installs before any user code
	// (compiled once by the engine, so init carries no profile compiler),
	// packed by bpfload.Encode.
	Seccomp []byte `json:"seccomp"`
	// KeepCapabilities are the capabilities user code keeps in its bounding
	// set; every other one is dropped.
	KeepCapabilities []uintptr `json:"keep_capabilities"`
	// LockDownEarly confines init right after building the sandbox rather
	// than when the job arrives (warm sandboxes: the work leaves the call's
	// critical path). A Prestart implies it.
	LockDownEarly bool `json:"lock_down_early"`
	// Prestart, when set, is an interpreter init starts (locked down, as
	// user code) right away; the job is later handed to it on its fd 3.
	Prestart *PrestartSpec `json:"prestart,omitempty"`
}

// PrestartSpec is the command line of a pre-started interpreter.
type PrestartSpec struct {
	Argv []string `json:"argv"`
	Env  []string `json:"env"`
	Dir  string   `json:"dir"`
}

// ReadyMessage answers SetupMessage.
type ReadyMessage struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// JobFile is one input file.
type JobFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// JobMessage is the one job a sandbox runs.
type JobMessage struct {
	Argv           []string      `json:"argv"`
	Env            []string      `json:"env"`
	Dir            string        `json:"dir"`
	Files          []JobFile     `json:"files"`
	ReturnFiles    []string      `json:"return_files"`
	MaxReturnBytes int64         `json:"max_return_bytes"`
	Timeout        time.Duration `json:"timeout"`
}

// ResultMessage answers JobMessage.
type ResultMessage struct {
	Started  bool              `json:"started"`
	ExitCode int               `json:"exit_code"`
	Signal   int               `json:"signal"`
	TimedOut bool              `json:"timed_out"`
	Duration time.Duration     `json:"duration"`
	Files    map[string][]byte `json:"files"`
	Notes    []string          `json:"notes"`
	Error    string            `json:"error,omitempty"`
}
