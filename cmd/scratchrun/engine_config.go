//go:build linux

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// engineSetup is a local engine as the settings describe it, before
// anything is opened: engine_wire.go opens the store and the backend and
// builds the engine from it.
type engineSetup struct {
	// engine is the engine's configuration but for what is opened (its
	// network manager and logger).
	engine engine.Config
	// network is the egress policy, nil without egress.
	network *netpolicy.Config
	backend backendSetup
	dataDir string
	debug   bool
}

// backendSetup chooses and configures the isolation level's backend.
type backendSetup struct {
	isolation, stateDir, cgroupParent string
	runsc, gvisorPlatform             string
	qemu, kernel, accel               string
	snapshots                         bool
	// allowUnenforced lets root run without the limits the host cannot
	// enforce.
	allowUnenforced bool
}

// Isolation levels --isolation accepts.
const (
	isolationNamespaces = "namespaces"
	isolationGVisor     = "gvisor"
	isolationMicroVM    = "microvm"
)

// parseEngine reads a local engine's settings for cmd: exec's engine runs
// one call (no admission: it would wait behind nothing of its own, no
// pool: it would only cost, and it leaves the sandboxes' cgroup parent and
// its memory limit as the servers that share it set them); a worker's
// refuses at once what it has no room for (the front ends wait, trying
// other workers meanwhile).
func parseEngine(v *settings.Values, cmd settings.Command) (engineSetup, error) {
	var s engineSetup
	cfg := engine.DefaultConfig()
	policy, err := parsePolicy(v)
	if err != nil {
		return s, err
	}
	cfg.Policy = policy
	cfg.OutputLimitBytes = v.Int(settings.OutputLimit)
	cfg.MaxReturnBytes = v.Int64(settings.MaxReturn)
	cfg.MaxPids = v.Int64(settings.MaxPids)
	cfg.TmpBytes = v.Int64(settings.TmpMB) << 20
	cfg.WritableBytes = v.Int64(settings.WritableMB) << 20
	cfg.CPUs = float64(v.Int64(settings.CPUMillicores)) / 1000
	if cmd != settings.Exec {
		cfg.Admission = parseAdmission(v, cmd)
		cfg.Pool = parsePool(v, policy.AllowEgress)
		cfg.Sessions.Policy = parseSessionPolicy(v, cmd)
		cfg.Zygote = v.Bool(settings.Zygote)
	}
	if policy.AllowEgress {
		s.network = parseNetwork(v)
	}
	s.engine, s.backend, s.dataDir, s.debug = cfg, parseBackend(v), dataDir(v), v.Bool(settings.Debug)
	return s, nil
}

// parsePolicy reads the limits every request is held to and the network
// modes it may ask for: a local engine's and a front end's alike.
func parsePolicy(v *settings.Values) (execapi.Policy, error) {
	p := execapi.DefaultPolicy()
	p.DefaultTimeout = time.Duration(v.Int64(settings.DefaultTimeout)) * time.Millisecond
	p.MaxTimeout = time.Duration(v.Int64(settings.MaxTimeout)) * time.Millisecond
	p.DefaultMemoryMB = v.Int(settings.DefaultMemory)
	p.MaxMemoryMB = v.Int(settings.MaxMemory)
	if p.DefaultTimeout > p.MaxTimeout {
		return p, fmt.Errorf("%s (%d) is above %s (%d)", settings.DefaultTimeout.Env, p.DefaultTimeout.Milliseconds(), settings.MaxTimeout.Env, p.MaxTimeout.Milliseconds())
	}
	if p.DefaultMemoryMB > p.MaxMemoryMB || p.DefaultMemoryMB < p.MinMemoryMB {
		return p, fmt.Errorf("%s (%d) must be between %d and %s (%d)", settings.DefaultMemory.Env, p.DefaultMemoryMB, p.MinMemoryMB, settings.MaxMemory.Env, p.MaxMemoryMB)
	}
	p.NetworkDefault = v.String(settings.NetworkDefault)
	// Egress as the default network lets requests have it.
	p.AllowEgress = v.Bool(settings.AllowEgress) || p.NetworkDefault == execapi.NetworkEgress
	return p, nil
}

// parseAdmission reads a server's admission: this machine's defaults
// (admission.Defaults), with what the settings give over them.
func parseAdmission(v *settings.Values, cmd settings.Command) admission.Settings {
	a := admission.Defaults(admission.MachineMemory())
	a.Capacity = v.Int(settings.Capacity)
	if v.IsSet(settings.MemoryBudget) {
		a.MemoryBudget = v.Size(settings.MemoryBudget)
	}
	a.CallFloor = v.Int64(settings.CallFloor) << 20
	a.CPUThreshold = v.Share(settings.CPUThreshold)
	wait := noQueueWait
	if cmd != settings.Worker {
		a.MaxQueue = v.Int(settings.Queue)
		wait = operatorQueueWait(v)
	}
	a.QueueWait = wait.admission()
	return a
}

// parseSessionPolicy reads the sessions cmd offers (off unless
// --sessions). A worker bounds no key's sessions: its front ends do, over
// every worker.
func parseSessionPolicy(v *settings.Values, cmd settings.Command) execapi.SessionPolicy {
	if !settings.Sessions.AppliesTo(cmd) || !v.Bool(settings.Sessions) {
		return execapi.SessionPolicy{}
	}
	p := execapi.SessionPolicy{
		Enabled:     true,
		IdleTTL:     v.Duration(settings.SessionsIdleTTL),
		MaxIdleTTL:  v.Duration(settings.SessionsMaxIdleTTL),
		MaxLifetime: v.Duration(settings.SessionsMaxLifetime),
		MaxMemoryMB: v.Int(settings.SessionsMaxMemory),
	}
	if settings.SessionsPerKey.AppliesTo(cmd) {
		p.PerKey = v.Int(settings.SessionsPerKey)
	}
	if settings.SessionsMax.AppliesTo(cmd) {
		p.Max = v.Int(settings.SessionsMax)
	}
	return p
}

// parsePool reads the warm pool of a server; it keeps egress sandboxes
// warm too when requests may ask for them.
func parsePool(v *settings.Values, egress bool) engine.PoolConfig {
	pc := engine.DefaultPoolConfig()
	pc.Floor = v.Int(settings.PoolFloor)
	pc.Max = v.Int(settings.PoolMax)
	pc.MemoryBudgetBytes = v.Int64(settings.PoolMemory) << 20
	pc.Builders = v.Int(settings.PoolBuilders)
	if egress {
		pc.Networks = append(pc.Networks, execapi.NetworkEgress)
	}
	return pc
}

// parseNetwork reads the egress policy.
func parseNetwork(v *settings.Values) *netpolicy.Config {
	nc := netpolicy.DefaultConfig()
	nc.DNS = v.IPs(settings.DNS)
	nc.Allowed = v.Prefixes(settings.EgressAllow)
	nc.Blocked = v.Prefixes(settings.EgressBlock)
	nc.Subnet = v.Prefix(settings.EgressSubnet)
	nc.MaxConnections = v.Int(settings.EgressMaxConnections)
	nc.NewConnectionsPerSecond = v.Int(settings.EgressConnectionsPerSecond)
	// nc.LockDir stays /run/scratchrun whatever SCRATCHRUN_STATE_DIR says:
	// every engine of the host must find the same lock files, or two would
	// each think themselves alone and remove the other's interfaces.
	return &nc
}

func parseBackend(v *settings.Values) backendSetup {
	return backendSetup{
		isolation: v.String(settings.Isolation), stateDir: v.String(settings.StateDir), cgroupParent: v.String(settings.CgroupParent),
		runsc: v.String(settings.Runsc), gvisorPlatform: v.String(settings.GVisorPlatform),
		qemu: v.String(settings.QEMU), kernel: v.String(settings.MicroVMKernel), accel: v.String(settings.MicroVMAccel),
		snapshots: v.Bool(settings.MicroVMSnapshots), allowUnenforced: v.Bool(settings.AllowUnenforced),
	}
}

// dataDir is where images live: SCRATCHRUN_DATA_DIR, else /var/lib/scratchrun
// for root (and for users who can read root's images), else the user's
// data directory.
func dataDir(v *settings.Values) string {
	if d := v.String(settings.DataDir); d != "" {
		return d
	}
	const system = "/var/lib/scratchrun"
	if os.Geteuid() == 0 {
		return system
	}
	if _, err := os.Stat(filepath.Join(system, "images")); err == nil {
		return system
	}
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "scratchrun")
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".local", "share", "scratchrun")
}

// withEgress lets requests ask for egress whatever the settings say
// (bench --network egress), with the egress policy the settings give.
func (s engineSetup) withEgress(v *settings.Values) engineSetup {
	s.engine.Policy.AllowEgress = true
	if s.network == nil {
		s.network = parseNetwork(v)
	}
	if !slices.Contains(s.engine.Pool.Networks, execapi.NetworkEgress) {
		s.engine.Pool.Networks = append(slices.Clone(s.engine.Pool.Networks), execapi.NetworkEgress)
	}
	return s
}

// withPool keeps pc warm instead of the settings' pool (bench keeps warm
// only what it measures).
func (s engineSetup) withPool(pc engine.PoolConfig) engineSetup {
	s.engine.Pool = pc
	return s
}
