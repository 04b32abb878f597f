package namespaces

import "time"

// initArg0 is argv[0] of a re-executed binary that must act as sandbox init.
// A plain argv[0] (not a subcommand) keeps the CLI's namespace clean and lets
// test binaries act as init too.
const initArg0 = "scratchrun-sandbox-init"

// File descriptors init inherits besides stdin/stdout/stderr.
const (
	controlFD = 3 // engine -> init: setupMessage, then jobMessage
	statusFD  = 4 // init -> engine: readyMessage, then resultMessage
)

// setupMessage tells init how to build the sandbox's file system.
type setupMessage struct {
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
}

// readyMessage answers setupMessage.
type readyMessage struct {
	Ready bool   `json:"ready"`
	Error string `json:"error,omitempty"`
}

// jobFile is one input file.
type jobFile struct {
	Path string `json:"path"`
	Data []byte `json:"data"`
}

// jobMessage is the one job a sandbox runs.
type jobMessage struct {
	Argv           []string      `json:"argv"`
	Env            []string      `json:"env"`
	Dir            string        `json:"dir"`
	Files          []jobFile     `json:"files"`
	ReturnFiles    []string      `json:"return_files"`
	MaxReturnBytes int64         `json:"max_return_bytes"`
	Timeout        time.Duration `json:"timeout"`
}

// resultMessage answers jobMessage.
type resultMessage struct {
	Started  bool              `json:"started"`
	ExitCode int               `json:"exit_code"`
	Signal   int               `json:"signal"`
	TimedOut bool              `json:"timed_out"`
	Duration time.Duration     `json:"duration"`
	Files    map[string][]byte `json:"files"`
	Notes    []string          `json:"notes"`
	Error    string            `json:"error,omitempty"`
}
