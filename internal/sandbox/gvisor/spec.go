package gvisor

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
)

// cpuPeriod is the CFS period the CPU quota is expressed in.
const cpuPeriod = 100000

// specInput is what one sandbox's OCI configuration is made from.
type specInput struct {
	cfg        sandbox.Config
	view       string   // the image's idmapped view (idmap.Views), "" to serve cfg.Image.RootFS as it is
	initCaps   []string // init's capabilities: the kept set plus CAP_SYS_ADMIN and CAP_SYS_RESOURCE
	cgroupPath string   // "" when runsc must not touch cgroups
	netnsPath  string   // the egress slot's namespace, "" for a new empty one
	memory     int64    // the host cgroup's memory limit (the Config's plus the Sentry's overhead)
	hostPids   int64    // the host cgroup's task limit (Sentry, gofer and stub threads)
}

// buildSpec returns the OCI configuration of a sandbox: the image as root
// (runsc's in-memory overlay keeps it unmodified), its own /proc, fresh
// pid/ipc/uts/mount/network namespaces, a user namespace mapping root to the
// sandboxes' uid (the image's owner when no view is given), and limits. Nothing of the host is mounted: init itself is
// handed to runsc as an open file (--exec-fd), because runsc's gofer creates
// the mount point of a bind mount in the image's directory on disk.
func buildSpec(in specInput) *specs.Spec {
	cfg := in.cfg
	nproc := uint64(cfg.MaxPids)
	spec := &specs.Spec{
		Version:  specs.Version,
		Hostname: "sandbox",
		// Writable as far as runsc is concerned: --overlay2=root:memory puts
		// a RAM-backed upper layer in the Sentry over it and the gofer
		// serves the image itself read-only.
		Root: &specs.Root{Path: cfg.Image.RootFS},
		Process: &specs.Process{
			// Only a name: the program comes from --exec-fd.
			Args: []string{goinit.GVisorInitPath, goinit.GVisorRoleInit},
			// Nothing of the engine's environment: it may hold API keys.
			Env:  []string{"GODEBUG=containermaxprocs=0,updatemaxprocs=0"},
			Cwd:  "/",
			User: specs.User{UID: 0, GID: 0},
			Capabilities: &specs.LinuxCapabilities{
				Bounding: in.initCaps, Effective: in.initCaps, Permitted: in.initCaps,
			},
		},
		Mounts: []specs.Mount{
			{Destination: "/proc", Type: "proc", Source: "proc"},
		},
		Linux: &specs.Linux{
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace}, {Type: specs.IPCNamespace}, {Type: specs.UTSNamespace},
				{Type: specs.MountNamespace}, {Type: specs.NetworkNamespace, Path: in.netnsPath},
			},
			CgroupsPath: in.cgroupPath,
		},
	}
	if nproc > 0 {
		// The Sentry counts tasks per user and refuses more than
		// RLIMIT_NPROC to a user without CAP_SYS_ADMIN or CAP_SYS_RESOURCE,
		// which user code never holds: this is what stops fork and thread
		// bombs inside (the host cgroup only sees the Sentry's threads).
		// Init and its reaper keep CAP_SYS_RESOURCE, so a full table never
		// stops them from making the threads their runtime needs.
		spec.Process.Rlimits = []specs.POSIXRlimit{{Type: "RLIMIT_NPROC", Hard: nproc, Soft: nproc}}
	}
	if in.view != "" {
		spec.Root.Path = in.view
	}
	if base := cfg.Image.UIDBase; base != 0 {
		if in.view != "" {
			// The view shows the image's files as idmap.SandboxBase's.
			base = idmap.SandboxBase
		}
		// The gofer and Sentry run as the sandboxes' uids in a user
		// namespace of their own, never as host root: an escape from the
		// Sentry lands in an unprivileged uid that owns no host file, not
		// even the image's (the gofer serves them through the view).
		spec.Linux.Namespaces = append(spec.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace})
		spec.Linux.UIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: 65536}}
		spec.Linux.GIDMappings = []specs.LinuxIDMapping{{ContainerID: 0, HostID: base, Size: 65536}}
	}
	if in.cgroupPath != "" {
		// The group already exists with these limits (runsc leaves a
		// pre-created group's settings alone); they are repeated so the
		// Sentry sizes itself (memory shown in /proc/meminfo) by them.
		res := &specs.LinuxResources{}
		if in.memory > 0 {
			m := in.memory
			res.Memory = &specs.LinuxMemory{Limit: &m}
		}
		if in.hostPids > 0 {
			res.Pids = &specs.LinuxPids{Limit: in.hostPids}
		}
		if cfg.CPUs > 0 {
			quota, period := int64(cfg.CPUs*cpuPeriod), uint64(cpuPeriod)
			res.CPU = &specs.LinuxCPU{Quota: &quota, Period: &period}
		}
		spec.Linux.Resources = res
	}
	return spec
}

// writeSpec writes spec as dir/config.json.
func writeSpec(dir string, spec *specs.Spec) error {
	data, err := json.Marshal(spec)
	if err != nil {
		return fmt.Errorf("encode OCI configuration: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), data, 0o600); err != nil {
		return fmt.Errorf("write OCI configuration: %w", err)
	}
	return nil
}
