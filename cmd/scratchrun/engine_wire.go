//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/gvisor"
	"github.com/scratchrun/scratchrun/internal/sandbox/microvm"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// imageUIDBase is the host uid that owns images' uid 0: far above any real
// account, below the 32-bit limit, and not a sandbox's (idmap.SandboxBase),
// which sees the image through an idmapped view.
const imageUIDBase = 1_000_000_000

// openStore opens the image store in dir (dataDir's).
func openStore(dir string) (*images.Store, error) {
	return images.OpenStore(images.Options{Root: dir, UIDBase: imageUIDBase})
}

// openImageStore opens the store where the environment says, for the
// commands with no engine (images).
func openImageStore() (*images.Store, error) {
	v, err := settings.Environment(os.Getenv, settings.Images)
	if err != nil {
		return nil, err
	}
	return openStore(dataDir(v))
}

// open opens the image store and the backend and builds the engine,
// stating once on stderr what the backend cannot enforce here.
func (s engineSetup) open(log *slog.Logger) (*engine.Engine, error) {
	cfg := s.engine
	cfg.Logger = log
	store, err := openStore(s.dataDir)
	if err != nil {
		return nil, err
	}
	backend, err := newBackend(s.backend, log)
	if err != nil {
		return nil, err
	}
	if err := unenforcedRefusal(backend, os.Geteuid() == 0, s.backend.allowUnenforced); err != nil {
		backend.Close()
		return nil, err
	}
	for _, l := range backend.Limitations() {
		fmt.Fprintf(os.Stderr, "scratchrun: warning: %s\n", l)
	}
	if s.network != nil {
		if os.Geteuid() != 0 {
			backend.Close()
			return nil, fmt.Errorf("network egress needs root (veth pairs, NAT and nftables rules); run as root or without --allow-egress")
		}
		if cfg.Network, err = netpolicy.New(*s.network, log); err != nil {
			backend.Close()
			return nil, err
		}
	}
	eng, err := engine.New(cfg, store, backend)
	if err != nil {
		if cfg.Network != nil {
			cfg.Network.Close()
		}
		backend.Close()
		return nil, err
	}
	return eng, nil
}

// newBackend opens the chosen isolation level's backend. The gVisor and
// microvm backends keep their files and cgroups apart from the namespaces
// backend's (their own state subdirectory and cgroup parent), so that
// none sweeps another's.
func newBackend(o backendSetup, log *slog.Logger) (sandbox.Backend, error) {
	switch o.isolation {
	case isolationMicroVM:
		opts := microvm.Options{Logger: log, QEMU: o.qemu, Kernel: o.kernel, Accel: o.accel, NoSnapshots: !o.snapshots,
			StateDir: subdir(o.stateDir, "microvm"), CgroupParent: suffixed(o.cgroupParent, "-microvm")}
		b, err := microvm.New(opts)
		if err != nil {
			return nil, fmt.Errorf("--isolation microvm: %w", err)
		}
		return b, nil
	case isolationGVisor:
		opts := gvisor.Options{Logger: log, Runsc: o.runsc, Platform: o.gvisorPlatform,
			StateDir: subdir(o.stateDir, "gvisor"), CgroupParent: suffixed(o.cgroupParent, "-gvisor")}
		b, err := gvisor.New(opts)
		if err != nil {
			return nil, fmt.Errorf("--isolation gvisor: %w", err)
		}
		return b, nil
	}
	b, err := namespaces.New(namespaces.Options{StateDir: o.stateDir, CgroupParent: o.cgroupParent, Logger: log})
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return b, nil
}

// subdir is dir/name, or "" (the backend's default) for no dir.
func subdir(dir, name string) string {
	if dir == "" {
		return ""
	}
	return filepath.Join(dir, name)
}

// suffixed is name+suffix, or "" (the backend's default) for no name.
func suffixed(name, suffix string) string {
	if name == "" {
		return ""
	}
	return name + suffix
}

// unenforcedRefusal stops root from running sandboxes without memory,
// process or CPU limits unless the operator said so (allowed): root can
// always have them, so their absence is a broken setup (a container
// without cgroup access, say), not a choice. An ordinary user is warned
// instead, and every result says so. The reason is the backend's own
// (sandbox.UnenforcedReason), not a sentence searched for.
func unenforcedRefusal(b sandbox.Backend, root, allowed bool) error {
	missing := b.UnenforcedLimits()
	if !root || allowed || len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("running as root, but %s Set %s=1 to run without them",
		sandbox.UnenforcedWarning(missing, sandbox.UnenforcedWhy(b)), settings.AllowUnenforced.Env)
}
