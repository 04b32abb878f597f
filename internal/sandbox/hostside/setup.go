package hostside

import (
	"slices"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp"
	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"
)

// Hostname is every sandbox's host name.
const Hostname = "sandbox"

// Confinement is what an init locks user code down with, the same for
// every sandbox of a backend: computed once, when the backend starts.
type Confinement struct {
	// Seccomp is the compiled filter (packed by bpfload.Encode): compiled
	// in the engine, so that no init carries a profile compiler.
	Seccomp []byte
	// Keep are the capabilities user code keeps in its bounding set, and
	// KeepNames the same as OCI names ("CAP_CHOWN", ...).
	Keep      []uintptr
	KeepNames []string
}

// NewConfinement compiles the sandbox's seccomp filter and keeps Docker's
// default capabilities (seccomp.DefaultCapabilities) except drop.
func NewConfinement(drop ...uintptr) (Confinement, error) {
	prog, err := seccomp.Program()
	if err != nil {
		return Confinement{}, err
	}
	c := Confinement{Seccomp: bpfload.Encode(prog)}
	for i, capability := range seccomp.DefaultCapabilities {
		if !slices.Contains(drop, capability) {
			c.Keep = append(c.Keep, capability)
			c.KeepNames = append(c.KeepNames, seccomp.DefaultCapabilityNames[i])
		}
	}
	return c, nil
}

// Setup is the part of a sandbox's setup message every backend sends alike
// for cfg: the /proc paths to hide and freeze (one list for every init),
// the /tmp sizes, the host name, the confinement, the pre-started
// interpreter and the joined network's resolvers. A warm sandbox locks down
// before it reports ready, so that the work leaves the call's path. The
// backend adds what is its own (the root file system, kernel limits, ...).
func Setup(cfg sandbox.Config, c Confinement) initproto.SetupMessage {
	m := initproto.SetupMessage{
		MaskPaths:        initproto.MaskedPaths,
		ReadOnlyPaths:    initproto.ReadOnlyPaths,
		TmpBytes:         cfg.TmpBytes,
		MaxInodes:        cfg.MaxInodes,
		Hostname:         Hostname,
		Seccomp:          c.Seccomp,
		KeepCapabilities: c.Keep,
		// A session locks down before it answers anything: a fork's
		// child holds a tree its parent's user code made, and no file
		// request may reach init with more than the jobs' confinement.
		LockDownEarly: cfg.Warm || cfg.Session,
	}
	if p := cfg.Prestart; p != nil {
		m.Prestart = &initproto.PrestartSpec{Argv: p.Argv, Env: p.Env, Dir: p.Dir}
	}
	if cfg.Network != nil {
		m.JoinedNetwork = true
		m.DNS = cfg.Network.DNS
	}
	return m
}
