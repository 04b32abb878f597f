package namespaces

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/idmap"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// Options configure the backend.
type Options struct {
	// StateDir holds the mount point sandboxes build on, and a build of the
	// spawner helper when none is installed.
	// Default: /run/scratchrun as root, $XDG_RUNTIME_DIR/scratchrun (or
	// /tmp/scratchrun-UID) otherwise.
	StateDir string
	// CgroupParent names the cgroup directory all sandboxes live under.
	CgroupParent string
	// Logger receives the backend's own diagnostics (never user data).
	Logger *slog.Logger
	// Spawner is the scratchrun-spawn helper, which starts every sandbox and
	// carries its init (see package spawner). Default: next to the running
	// executable, else built from its embedded source into StateDir with
	// the host's C compiler.
	Spawner string
}

// Backend creates namespace sandboxes.
type Backend struct {
	opts        Options
	cgroups     *cgroups.Manager
	mountDir    string
	rootless    bool
	instance    string
	limitations []string
	unenforced  []sandbox.Limit
	// unenforcedWhy is why the host does not let it enforce them.
	unenforcedWhy string
	confinement   hostside.Confinement
	// owners gives each sandbox's user namespace an owner uid of its own
	// (nil when not root: an ordinary user's namespaces are its own).
	owners *owners
	// views are the idmapped views of images sandboxes build on (nil
	// when not root: an ordinary user cannot make idmapped mounts, and its
	// sandboxes run as itself, which owns no image file).
	views *idmap.Views

	// zygotes serve sandboxes that ask for one (sandbox.Config.Zygote;
	// nil when not root); zygotesGone counts retired ones not yet gone.
	zygotes     *zygotePool[*zygoteProcess]
	zygotesGone sync.WaitGroup

	spawnerMu       sync.Mutex
	spawner         *spawner.Spawner // starts every init; replaced if it dies
	spawnerPath     string
	spawnerRestarts int
	closed          bool
}

var _ sandbox.Backend = (*Backend)(nil)
var _ sandbox.MemoryBudget = (*Backend)(nil)

// sandboxSeq numbers sandboxes per process, not per backend: backends of one
// process share the instance name, and may share a cgroup parent.
var sandboxSeq atomic.Uint64

// DefaultStateDir is where the backend keeps its files when Options.StateDir
// is empty.
func DefaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/run/scratchrun"
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "scratchrun")
	}
	return filepath.Join(os.TempDir(), fmt.Sprintf("scratchrun-%d", os.Getuid()))
}

// New prepares the backend: it checks that user namespaces work, starts the
// spawner helper (building it first if needed), finds the cgroup hierarchy
// and removes what a crashed engine left behind.
func New(opts Options) (*Backend, error) {
	if opts.StateDir == "" {
		opts.StateDir = DefaultStateDir()
	}
	if opts.CgroupParent == "" {
		opts.CgroupParent = "scratchrun"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Backend{opts: opts, rootless: os.Geteuid() != 0}
	if !b.rootless {
		b.owners = newOwners()
	}
	if err := checkUserNamespaces(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("create state directory %s: %w", opts.StateDir, err)
	}
	// The sandbox's root maps to an unprivileged host uid, which must be able
	// to reach the mount point.
	if err := os.Chmod(opts.StateDir, 0o755); err != nil {
		return nil, fmt.Errorf("chmod %s: %w", opts.StateDir, err)
	}
	b.mountDir = filepath.Join(opts.StateDir, "mnt")
	if err := os.MkdirAll(b.mountDir, 0o755); err != nil {
		return nil, fmt.Errorf("create mount point %s: %w", b.mountDir, err)
	}
	// Docker keeps CAP_NET_RAW for ping; a sandbox has no use for raw or
	// packet sockets, a classic route to spoofing and kernel bugs.
	var err error
	if b.confinement, err = hostside.NewConfinement(unix.CAP_NET_RAW); err != nil {
		return nil, err
	}
	// Cgroups first: in a delegated cgroup v2 subtree the engine moves itself
	// into a leaf, and the spawner must start there too, not in the
	// delegated group, which may then hand no controller to its children.
	b.instance, err = hostside.InstanceName(os.Getpid())
	if err != nil {
		return nil, err
	}
	b.cgroups, err = cgroups.New(opts.CgroupParent)
	if err != nil {
		b.cgroups = nil
		b.unenforced, b.unenforcedWhy = cgroups.Unenforced(nil), err.Error()
		b.limitations = append(b.limitations, sandbox.UnenforcedWarning(b.unenforced, b.unenforcedWhy))
	} else {
		if b.unenforced = cgroups.Unenforced(b.cgroups); len(b.unenforced) > 0 {
			_, b.unenforcedWhy = b.cgroups.Missing()
			b.limitations = append(b.limitations, sandbox.UnenforcedWarning(b.unenforced, b.unenforcedWhy))
		}
		n, err := hostside.SweepDeadEngines(b.cgroups)
		hostside.LogSweep(opts.Logger, "sandboxes", n, err)
	}
	if !b.rootless {
		n, err := idmap.SweepViews(opts.StateDir, hostside.InstanceAlive)
		hostside.LogSweep(opts.Logger, "image views", n, err)
		n, err = sweepZygoteStages(opts.StateDir, hostside.InstanceAlive)
		hostside.LogSweep(opts.Logger, "zygote stages", n, err)
		b.views = idmap.NewViews(opts.StateDir, b.instance)
		b.zygotes = newZygotePool(b.startZygoteFor, b.retireZygote, opts.Logger)
	}
	if err := b.startSpawner(); err != nil {
		return nil, fmt.Errorf("the namespaces backend needs %s (scripts/install.sh builds it): %w", spawner.BinaryName, err)
	}
	if b.rootless {
		b.limitations = append(b.limitations,
			"running as an ordinary user: the sandbox's root maps to your own uid, and image files owned by other uids are read-only inside")
	}
	return b, nil
}

// Close implements sandbox.Backend: it stops the spawner helper, removes
// the images' idmapped views and the backend's empty cgroup parent
// directories; nothing else is touched. Sandboxes must all be destroyed
// first.
func (b *Backend) Close() error {
	if b.zygotes != nil {
		b.zygotes.close()
		b.zygotes.wait()
		b.zygotesGone.Wait()
	}
	b.spawnerMu.Lock()
	b.closed = true
	if b.spawner != nil {
		_ = b.spawner.Close()
	}
	b.spawnerMu.Unlock()
	var errs []error
	if b.views != nil {
		errs = append(errs, b.views.Close())
	}
	if b.cgroups != nil {
		errs = append(errs, b.cgroups.RemoveParent())
	}
	return errors.Join(errs...)
}

// Name implements sandbox.Backend.
func (b *Backend) Name() string { return "namespaces" }

// Limitations implements sandbox.Backend.
func (b *Backend) Limitations() []string { return b.limitations }

// UnenforcedLimits implements sandbox.Backend.
func (b *Backend) UnenforcedLimits() []sandbox.Limit { return b.unenforced }

// UnenforcedWhy implements sandbox.UnenforcedReason.
func (b *Backend) UnenforcedWhy() string { return b.unenforcedWhy }

// SetMemoryBudget implements sandbox.MemoryBudget: the limit of the cgroup
// parent every sandbox of this level lives under.
func (b *Backend) SetMemoryBudget(bytes int64) (bool, error) {
	return hostside.SetMemoryBudget(b.cgroups, bytes)
}

// MemoryInUse implements sandbox.MemoryBudget.
func (b *Backend) MemoryInUse() int64 { return hostside.MemoryInUse(b.cgroups) }

// Cgroups exposes the cgroup manager (nil when limits are not enforced), so
// that leak checks can list what is left.
func (b *Backend) Cgroups() *cgroups.Manager { return b.cgroups }

func checkUserNamespaces() error {
	data, err := os.ReadFile("/proc/sys/user/max_user_namespaces")
	if err == nil && strings.TrimSpace(string(data)) == "0" {
		return errors.New("user namespaces are disabled on this host (user.max_user_namespaces = 0)")
	}
	if os.Geteuid() != 0 {
		if data, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(data)) == "0" {
			return errors.New("unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone = 0): run as root or enable them")
		}
	}
	return nil
}

// Create implements sandbox.Backend.
func (b *Backend) Create(ctx context.Context, cfg sandbox.Config) (sandbox.Sandbox, error) {
	// A zygote serves only what it was built for: a pre-started
	// interpreter, network none (a sandbox born in a network namespace is
	// joined by the helper, which the zygote's filter and capabilities
	// forbid), no session.
	if zc := cfg.Zygote; zc != nil && b.zygotes != nil && cfg.Prestart != nil && cfg.Network == nil && !cfg.Session {
		z, done, err := b.zygotes.get(ctx, *zc, cfg.Image)
		if err == nil {
			sb, err := b.create(ctx, cfg, z)
			done()
			if err == nil || ctx.Err() != nil {
				return sb, err
			}
			b.opts.Logger.Warn("a zygote failed to make a sandbox; the helper makes it", "caller", zc.Caller, "runtime", zc.Runtime, "variant", zc.Variant, "err", err)
		}
	}
	return b.create(ctx, cfg, nil)
}

// newID names a new sandbox (or zygote) group: the engine's instance and
// a number, the shape hostside.EngineAlive reads when it sweeps a dead
// engine's.
func (b *Backend) newID() string { return fmt.Sprintf("%s_%d", b.instance, sandboxSeq.Add(1)) }

// create makes a sandbox whose init via starts (nil: the helper).
func (b *Backend) create(ctx context.Context, cfg sandbox.Config, via *zygoteProcess) (sandbox.Sandbox, error) {
	id := b.newID()
	if cfg.Session && cfg.Prestart != nil {
		return nil, errors.New("a session sandbox cannot have a pre-started interpreter")
	}
	s := &nsSandbox{id: id, backend: b, background: cfg.Background, via: via}
	if err := hostside.StartOrDestroy(s, "", b.opts.Logger, func() error { return s.start(ctx, cfg) }); err != nil {
		return nil, err
	}
	if cfg.Session {
		return &nsSession{nsSandbox: s}, nil
	}
	return s, nil
}

func (b *Backend) idMappings() (uids, gids []syscall.SysProcIDMap, setgroups bool) {
	if b.rootless {
		return []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
			[]syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}, false
	}
	// Root inside is an unprivileged host uid that owns no host file, not
	// even the image's (see idmap.SandboxBase): the image is shown to it
	// through an idmapped view (b.views).
	m := []syscall.SysProcIDMap{{ContainerID: 0, HostID: idmap.SandboxBase, Size: idmap.Size}}
	return m, m, true
}
