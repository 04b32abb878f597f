package main

import (
	"flag"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/gvisor"
	"github.com/scratchrun/scratchrun/internal/sandbox/microvm"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
)

// imageUIDBase is the host uid that owns images' uid 0: far above any real
// account, below the 32-bit limit, and not a sandbox's (idmap.SandboxBase),
// which sees the image through an idmapped view.
const imageUIDBase = 1_000_000_000

// dataDir is where images live: SCRATCHRUN_DATA_DIR, else /var/lib/scratchrun
// for root (and for users who can read root's images), else the user's
// data directory.
func dataDir() string {
	if d := os.Getenv("SCRATCHRUN_DATA_DIR"); d != "" {
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

func openStore() (*images.Store, error) {
	return images.OpenStore(images.Options{Root: dataDir(), UIDBase: imageUIDBase})
}

// envSettings are the operator's knobs, read from the environment so that the
// same settings apply to exec, mcp and serve.
type envSetting struct {
	name  string
	apply func(cfg *engine.Config, n int64)
}

var envSettings = []envSetting{
	{"SCRATCHRUN_DEFAULT_TIMEOUT_MS", func(c *engine.Config, n int64) { c.Policy.DefaultTimeout = time.Duration(n) * time.Millisecond }},
	{"SCRATCHRUN_MAX_TIMEOUT_MS", func(c *engine.Config, n int64) { c.Policy.MaxTimeout = time.Duration(n) * time.Millisecond }},
	{"SCRATCHRUN_DEFAULT_MEMORY_MB", func(c *engine.Config, n int64) { c.Policy.DefaultMemoryMB = int(n) }},
	{"SCRATCHRUN_MAX_MEMORY_MB", func(c *engine.Config, n int64) { c.Policy.MaxMemoryMB = int(n) }},
	{"SCRATCHRUN_OUTPUT_LIMIT_BYTES", func(c *engine.Config, n int64) { c.OutputLimitBytes = int(n) }},
	{"SCRATCHRUN_MAX_RETURN_BYTES", func(c *engine.Config, n int64) { c.MaxReturnBytes = n }},
	{"SCRATCHRUN_MAX_PIDS", func(c *engine.Config, n int64) { c.MaxPids = n }},
	{"SCRATCHRUN_TMP_MB", func(c *engine.Config, n int64) { c.TmpBytes = n << 20 }},
	{"SCRATCHRUN_WRITABLE_MB", func(c *engine.Config, n int64) { c.WritableBytes = n << 20 }},
	{"SCRATCHRUN_MAX_CONCURRENT", func(c *engine.Config, n int64) { c.Admission.Capacity = int(n) }},
	{"SCRATCHRUN_CALL_FLOOR_MB", func(c *engine.Config, n int64) { c.Admission.CallFloor = n << 20 }},
	{"SCRATCHRUN_QUEUE", func(c *engine.Config, n int64) { c.Admission.MaxQueue = int(n) }},
	{"SCRATCHRUN_CPU_MILLICORES", func(c *engine.Config, n int64) { c.CPUs = float64(n) / 1000 }},
}

// engineOverrides are a subcommand's own flags for the engine, which win
// over the environment; zero fields leave it be.
type engineOverrides struct {
	// capacity is `serve --capacity`, queue `--queue`.
	capacity, queue int
	// queueWait is `serve --queue-wait` when given.
	queueWait *time.Duration
	// memoryBudget is `serve --memory-budget` when given (0: none).
	memoryBudget *int64
	// cpuThreshold is `serve --cpu-threshold` when given (0: none).
	cpuThreshold *float64
}

// engineConfig builds the engine's configuration from defaults (a
// server's admission: admission.Defaults for this machine), the
// environment and a subcommand's overrides, naming the variable in any
// error.
func engineConfig(log *slog.Logger, o engineOverrides) (engine.Config, error) {
	cfg := engine.DefaultConfig()
	cfg.Logger = log
	cfg.Admission = admission.Defaults(admission.MachineMemory())
	for _, s := range envSettings {
		v, ok := os.LookupEnv(s.name)
		if !ok || v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("%s=%q: want a positive integer", s.name, v)
		}
		s.apply(&cfg, n)
	}
	if err := admissionEnv(&cfg.Admission); err != nil {
		return cfg, err
	}
	o.apply(&cfg.Admission)
	p := cfg.Policy
	if p.DefaultTimeout > p.MaxTimeout {
		return cfg, fmt.Errorf("SCRATCHRUN_DEFAULT_TIMEOUT_MS (%d) is above SCRATCHRUN_MAX_TIMEOUT_MS (%d)", p.DefaultTimeout.Milliseconds(), p.MaxTimeout.Milliseconds())
	}
	if p.DefaultMemoryMB > p.MaxMemoryMB || p.DefaultMemoryMB < p.MinMemoryMB {
		return cfg, fmt.Errorf("SCRATCHRUN_DEFAULT_MEMORY_MB (%d) must be between %d and SCRATCHRUN_MAX_MEMORY_MB (%d)", p.DefaultMemoryMB, p.MinMemoryMB, p.MaxMemoryMB)
	}
	return cfg, nil
}

// admissionEnv reads the admission settings that are not plain positive
// integers (those are in envSettings): SCRATCHRUN_MEMORY_BUDGET_MB and
// SCRATCHRUN_CPU_THRESHOLD (0 turns either condition off) and
// SCRATCHRUN_QUEUE_WAIT (0: no waiting).
func admissionEnv(a *admission.Settings) error {
	if v := os.Getenv("SCRATCHRUN_MEMORY_BUDGET_MB"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 || n > 1<<30 {
			return fmt.Errorf("SCRATCHRUN_MEMORY_BUDGET_MB=%q: want a size in MiB (0: no memory budget)", v)
		}
		a.MemoryBudget = n << 20
	}
	if v := os.Getenv("SCRATCHRUN_CPU_THRESHOLD"); v != "" {
		f, err := parseThreshold(v)
		if err != nil {
			return fmt.Errorf("SCRATCHRUN_CPU_THRESHOLD=%q: %v", v, err)
		}
		a.CPUThreshold = f
	}
	if v := os.Getenv("SCRATCHRUN_QUEUE_WAIT"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return fmt.Errorf("SCRATCHRUN_QUEUE_WAIT=%q: want a duration such as 2s (0: no waiting)", v)
		}
		a.QueueWait = queueWaitSetting(d)
	}
	return nil
}

// parseThreshold reads a CPU pressure threshold: a share between 0 and 1
// (0 turns the CPU condition off).
func parseThreshold(v string) (float64, error) {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1 {
		return 0, fmt.Errorf("want a share of time between 0 and 1, e.g. 0.8 (0: no CPU condition)")
	}
	return f, nil
}

// queueWaitSetting maps a queue wait as operators give it (0 means no
// waiting) to admission's (0 means as long as the call's context allows,
// negative no waiting).
func queueWaitSetting(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// apply puts the flags that were given over a.
func (o engineOverrides) apply(a *admission.Settings) {
	if o.capacity > 0 {
		a.Capacity = o.capacity
	}
	if o.queue > 0 {
		a.MaxQueue = o.queue
	}
	if o.queueWait != nil {
		a.QueueWait = queueWaitSetting(*o.queueWait)
	}
	if o.memoryBudget != nil {
		a.MemoryBudget = *o.memoryBudget
	}
	if o.cpuThreshold != nil {
		a.CPUThreshold = *o.cpuThreshold
	}
}

// operatorOptions are settings given as flags to exec, mcp and serve; each
// flag also has an environment variable, which the flag overrides.
type operatorOptions struct {
	networkDefault string
	allowEgress    bool
	isolation      string
}

// operator holds the flags' values once parsed (zero: take the environment).
var operator operatorOptions

// addOperatorFlags registers --network-default, --allow-egress and
// --isolation on fs.
func addOperatorFlags(fs *flag.FlagSet) {
	fs.StringVar(&operator.networkDefault, "network-default", "", `network for requests that name none: "none" or "egress" (env SCRATCHRUN_NETWORK_DEFAULT; default none)`)
	fs.BoolVar(&operator.allowEgress, "allow-egress", false, "let requests ask for network egress (env SCRATCHRUN_ALLOW_EGRESS=1; needs root)")
	fs.StringVar(&operator.isolation, "isolation", "", `isolation level: "namespaces" (Linux namespaces, shares the host kernel), "gvisor" (gVisor's application kernel; needs root and runsc) or "microvm" (a virtual machine with its own kernel per call; needs root and QEMU) (env SCRATCHRUN_ISOLATION; default namespaces)`)
}

// Isolation levels --isolation accepts.
const (
	isolationNamespaces = "namespaces"
	isolationGVisor     = "gvisor"
	isolationMicroVM    = "microvm"
)

// isolationSetting resolves the isolation level from flag and environment.
func isolationSetting() (string, error) {
	v := operator.isolation
	if v == "" {
		v = os.Getenv("SCRATCHRUN_ISOLATION")
	}
	switch v {
	case "", isolationNamespaces:
		return isolationNamespaces, nil
	case isolationGVisor, isolationMicroVM:
		return v, nil
	}
	return "", fmt.Errorf("--isolation / SCRATCHRUN_ISOLATION %q: want namespaces, gvisor or microvm", v)
}

// newBackend opens the chosen isolation level's backend. The gVisor backend
// keeps its files and cgroups apart from the namespaces backend's (its own
// state subdirectory and cgroup parent), so neither sweeps the other's.
func newBackend(log *slog.Logger) (sandbox.Backend, error) {
	isolation, err := isolationSetting()
	if err != nil {
		return nil, err
	}
	stateDir, parent := os.Getenv("SCRATCHRUN_STATE_DIR"), os.Getenv("SCRATCHRUN_CGROUP_PARENT")
	if isolation == isolationNamespaces {
		b, err := namespaces.New(namespaces.Options{StateDir: stateDir, CgroupParent: parent, Logger: log})
		if err != nil {
			return nil, err // not a typed nil in the interface
		}
		return b, nil
	}
	if isolation == isolationMicroVM {
		return newMicroVM(log, stateDir, parent)
	}
	opts := gvisor.Options{Logger: log, Runsc: os.Getenv("SCRATCHRUN_RUNSC"), Platform: os.Getenv("SCRATCHRUN_GVISOR_PLATFORM")}
	if stateDir != "" {
		opts.StateDir = filepath.Join(stateDir, "gvisor")
	}
	if parent != "" {
		opts.CgroupParent = parent + "-gvisor"
	}
	b, err := gvisor.New(opts)
	if err != nil {
		return nil, fmt.Errorf("--isolation gvisor: %w", err)
	}
	return b, nil
}

// newMicroVM opens the microvm backend, apart from the others' files and
// cgroups as gVisor's is.
func newMicroVM(log *slog.Logger, stateDir, parent string) (sandbox.Backend, error) {
	opts := microvm.Options{Logger: log, QEMU: os.Getenv("SCRATCHRUN_QEMU"), Kernel: os.Getenv("SCRATCHRUN_MICROVM_KERNEL"),
		Accel: os.Getenv("SCRATCHRUN_MICROVM_ACCEL")}
	if v := os.Getenv("SCRATCHRUN_MICROVM_SNAPSHOTS"); v != "" {
		on, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("SCRATCHRUN_MICROVM_SNAPSHOTS=%q: want 1 or 0", v)
		}
		opts.NoSnapshots = !on
	}
	if stateDir != "" {
		opts.StateDir = filepath.Join(stateDir, "microvm")
	}
	if parent != "" {
		opts.CgroupParent = parent + "-microvm"
	}
	b, err := microvm.New(opts)
	if err != nil {
		return nil, fmt.Errorf("--isolation microvm: %w", err)
	}
	return b, nil
}

// allowUnenforcedEnv lets root run sandboxes without the limits the host
// cannot enforce.
const allowUnenforcedEnv = "SCRATCHRUN_ALLOW_UNENFORCED_LIMITS"

// refuseUnenforcedAsRoot stops root from running sandboxes without memory,
// process or CPU limits unless the operator said so: root can always have
// them, so their absence is a broken setup (a container without cgroup
// access, say), not a choice. An ordinary user is warned instead, and every
// result says so.
func refuseUnenforcedAsRoot(b sandbox.Backend) error {
	missing := b.UnenforcedLimits()
	if os.Geteuid() != 0 || len(missing) == 0 {
		return nil
	}
	if v := os.Getenv(allowUnenforcedEnv); v != "" {
		ok, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%s=%q: want 1 or 0", allowUnenforcedEnv, v)
		}
		if ok {
			return nil
		}
	}
	warning := sandbox.UnenforcedWarning(missing, "")
	for _, l := range b.Limitations() {
		if strings.Contains(l, " NOT enforced") {
			warning = l
		}
	}
	return fmt.Errorf("running as root, but %s Set %s=1 to run without them", warning, allowUnenforcedEnv)
}

// networkSettings resolves the network policy from flags and environment.
func networkSettings(cfg *engine.Config) (*netpolicy.Config, error) {
	def := operator.networkDefault
	if def == "" {
		def = os.Getenv("SCRATCHRUN_NETWORK_DEFAULT")
	}
	if def == "" {
		def = execapi.NetworkNone
	}
	if def != execapi.NetworkNone && def != execapi.NetworkEgress {
		return nil, fmt.Errorf("--network-default / SCRATCHRUN_NETWORK_DEFAULT %q: want none or egress", def)
	}
	allow := operator.allowEgress
	if v := os.Getenv("SCRATCHRUN_ALLOW_EGRESS"); !allow && v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("SCRATCHRUN_ALLOW_EGRESS=%q: want 1 or 0", v)
		}
		allow = b
	}
	if def == execapi.NetworkEgress {
		allow = true
	}
	cfg.Policy.NetworkDefault, cfg.Policy.AllowEgress = def, allow
	if !allow {
		return nil, nil
	}
	nc := netpolicy.DefaultConfig()
	var err error
	if nc.DNS, err = parseAddrs("SCRATCHRUN_DNS"); err != nil {
		return nil, err
	}
	if nc.Allowed, err = parsePrefixes("SCRATCHRUN_EGRESS_ALLOW"); err != nil {
		return nil, err
	}
	if nc.Blocked, err = parsePrefixes("SCRATCHRUN_EGRESS_BLOCK"); err != nil {
		return nil, err
	}
	if v := os.Getenv("SCRATCHRUN_EGRESS_SUBNET"); v != "" {
		if nc.Subnet, err = netip.ParsePrefix(v); err != nil {
			return nil, fmt.Errorf("SCRATCHRUN_EGRESS_SUBNET=%q: %v", v, err)
		}
	}
	for _, limit := range []struct {
		name string
		dst  *int
	}{{"SCRATCHRUN_EGRESS_MAX_CONNECTIONS", &nc.MaxConnections}, {"SCRATCHRUN_EGRESS_CONNECTIONS_PER_SECOND", &nc.NewConnectionsPerSecond}} {
		v := os.Getenv(limit.name)
		if v == "" {
			continue
		}
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1<<20 {
			return nil, fmt.Errorf("%s=%q: want a positive integer", limit.name, v)
		}
		*limit.dst = n
	}
	// nc.LockDir stays /run/scratchrun whatever SCRATCHRUN_STATE_DIR says:
	// every engine of the host must find the same lock files, or two would
	// each think themselves alone and remove the other's interfaces.
	return &nc, nil
}

func parseAddrs(name string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, f := range strings.FieldsFunc(os.Getenv(name), func(r rune) bool { return r == ',' || r == ' ' }) {
		a, err := netip.ParseAddr(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not an IP address", name, f)
		}
		out = append(out, a)
	}
	return out, nil
}

func parsePrefixes(name string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, f := range strings.FieldsFunc(os.Getenv(name), func(r rune) bool { return r == ',' || r == ' ' }) {
		p, err := netip.ParsePrefix(f)
		if err != nil {
			if a, aerr := netip.ParseAddr(f); aerr == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			} else {
				return nil, fmt.Errorf("%s: %q is not a CIDR prefix or address", name, f)
			}
		}
		out = append(out, p)
	}
	return out, nil
}

// newEngine opens the image store and the backend and builds the engine,
// stating once on stderr what the backend cannot enforce here.
//
// newEngine is for long-running servers (mcp, serve): it keeps a warm pool
// (SCRATCHRUN_POOL_FLOOR, SCRATCHRUN_POOL_MAX, SCRATCHRUN_POOL_MEMORY_MB;
// floor 0 turns it off).
func newEngine(log *slog.Logger, o engineOverrides) (*engine.Engine, error) {
	pool, err := poolConfig()
	if err != nil {
		return nil, err
	}
	return newEngineWithPool(log, o, pool)
}

// newOneShotEngine is for one call (exec): a pool would only cost, and so
// would admission, which would wait behind nothing of its own; it leaves
// the sandboxes' cgroup parent, and its memory limit, as the servers that
// share it set them.
func newOneShotEngine(log *slog.Logger) (*engine.Engine, error) {
	return newEngineWith(log, engineOverrides{}, engine.PoolConfig{}, true)
}

func poolConfig() (engine.PoolConfig, error) {
	pc := engine.DefaultPoolConfig()
	for _, s := range []struct {
		name string
		set  func(n int64)
	}{
		{"SCRATCHRUN_POOL_FLOOR", func(n int64) { pc.Floor = int(n) }},
		{"SCRATCHRUN_POOL_MAX", func(n int64) { pc.Max = int(n) }},
		{"SCRATCHRUN_POOL_MEMORY_MB", func(n int64) { pc.MemoryBudgetBytes = n << 20 }},
		{"SCRATCHRUN_POOL_BUILDERS", func(n int64) { pc.Builders = int(n) }},
	} {
		v := os.Getenv(s.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return pc, fmt.Errorf("%s=%q: want a non-negative integer", s.name, v)
		}
		s.set(n)
	}
	if operator.allowEgress || os.Getenv("SCRATCHRUN_ALLOW_EGRESS") != "" {
		pc.Networks = append(pc.Networks, execapi.NetworkEgress)
	}
	return pc, nil
}

func newEngineWithPool(log *slog.Logger, o engineOverrides, pool engine.PoolConfig) (*engine.Engine, error) {
	return newEngineWith(log, o, pool, false)
}

// newEngineWith builds the engine; oneShot drops admission (see
// newOneShotEngine).
func newEngineWith(log *slog.Logger, o engineOverrides, pool engine.PoolConfig, oneShot bool) (*engine.Engine, error) {
	cfg, err := engineConfig(log, o)
	if err != nil {
		return nil, err
	}
	cfg.Pool = pool
	if oneShot {
		cfg.Admission = admission.Settings{}
	}
	store, err := openStore()
	if err != nil {
		return nil, err
	}
	backend, err := newBackend(log)
	if err != nil {
		return nil, err
	}
	if err := refuseUnenforcedAsRoot(backend); err != nil {
		backend.Close()
		return nil, err
	}
	for _, l := range backend.Limitations() {
		fmt.Fprintf(os.Stderr, "scratchrun: warning: %s\n", l)
	}
	nc, err := networkSettings(&cfg)
	if err != nil {
		backend.Close()
		return nil, err
	}
	if nc != nil {
		if os.Geteuid() != 0 {
			backend.Close()
			return nil, fmt.Errorf("network egress needs root (veth pairs, NAT and nftables rules); run as root or without --allow-egress")
		}
		if cfg.Network, err = netpolicy.New(*nc, log); err != nil {
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

func newLogger() *slog.Logger {
	level := slog.LevelWarn
	if os.Getenv("SCRATCHRUN_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
}
