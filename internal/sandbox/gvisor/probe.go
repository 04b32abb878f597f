package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// probeTimeout bounds one start-up probe (KVM that hangs must not hang New).
const probeTimeout = 60 * time.Second

// probeUIDBase owns the probe's empty root directory; like an image's owner
// it is an unprivileged uid no host file belongs to.
const probeUIDBase = 1_000_000_000

// choosePlatform runs the probe on the configured platform, or on KVM when
// /dev/kvm is usable and on systrap otherwise, and fails New with what is
// missing when no platform runs a sandbox. A verdict is kept for this boot
// of the host (hostside.ProbeCache): a one-shot `scratchrun exec` after
// another engine pays for one sandbox, not two, and a KVM platform that
// hangs costs its timeout once per boot.
func (b *Backend) choosePlatform() error {
	marker := b.probeMarker()
	if lines, ok := b.probeCache().Read(marker); ok {
		b.platform = lines[0]
		b.limitations = append(b.limitations, lines[1:]...)
		b.probeCached = true
		return nil
	}
	limitationsBefore := len(b.limitations)
	if err := b.probeEach(); err != nil {
		return err
	}
	b.record(marker, append([]string{b.platform}, b.limitations[limitationsBefore:]...))
	return nil
}

func (b *Backend) probeCache() hostside.ProbeCache {
	return hostside.ProbeCache{Dir: b.opts.ProbeCacheDir, BootIDFile: b.opts.bootIDFile}
}

func (b *Backend) record(marker string, lines []string) {
	if err := b.probeCache().Record(marker, lines); err != nil {
		b.opts.Logger.Warn("recording the gVisor probe", "err", err)
	}
}

// probeMarker names the verdict of a probe of exactly these binaries with
// these options on this boot.
func (b *Backend) probeMarker() string {
	return b.probeCache().Marker("gvisor-probe-", []string{b.runsc, b.initPath},
		b.runsc, b.initPath, b.opts.Platform, b.opts.CgroupParent, b.cgroups != nil)
}

// kvmMarker names the verdict of the KVM platform for this runsc on this
// boot, kept apart from the whole probe's: whatever else fails or changes,
// a KVM that hangs is not tried again until the host reboots.
func (b *Backend) kvmMarker() string {
	return b.probeCache().Marker("gvisor-kvm-", []string{b.runsc}, b.runsc)
}

// probeEach tries the platforms in order of preference.
func (b *Backend) probeEach() error {
	if p := b.opts.Platform; p != "" {
		if err := b.probe(p); err != nil {
			return fmt.Errorf("gVisor cannot run here on the %s platform: %w", p, err)
		}
		b.platform = p
		return nil
	}
	if err := kvmUsable(); err == nil {
		if why, failed := b.probeCache().Read(b.kvmMarker()); failed {
			b.limitations = append(b.limitations, kvmLimitation(why[0]))
		} else if err := b.probe(PlatformKVM); err == nil {
			b.platform = PlatformKVM
			return nil
		} else {
			why := hostside.FirstLine(err.Error())
			b.record(b.kvmMarker(), []string{why})
			b.limitations = append(b.limitations, kvmLimitation(why))
		}
	}
	if err := b.probe(PlatformSystrap); err != nil {
		return fmt.Errorf("gVisor cannot run here (runsc %s, platform systrap): %w", b.runsc, err)
	}
	b.platform = PlatformSystrap
	return nil
}

func kvmLimitation(why string) string {
	return fmt.Sprintf("gVisor's KVM platform does not work on this host (%v); sandboxes use the slower systrap platform", why)
}

// kvmUsable reports why KVM cannot be used, nil when /dev/kvm opens.
func kvmUsable() error {
	fd, err := unix.Open("/dev/kvm", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("/dev/kvm: %w", err)
	}
	unix.Close(fd)
	return nil
}

// probe runs one sandbox end to end on platform: an empty root, and a job
// that runs the init program again (as /proc/self/exe) in its probe role. It
// proves runsc, the platform, cgroups, the user namespace, descriptor
// passing and the init protocol all work, in about one sandbox's start time.
func (b *Backend) probe(platform string) error {
	// A dynamically linked init needs a C library to start at all: the probe
	// then runs on the host's root, read-only under the in-memory overlay
	// (as `runsc do` does). Only the init program runs in it.
	root := "/"
	if !b.dynamicInit {
		var err error
		if root, err = probeRoot(b.opts.StateDir); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	s, err := b.create(ctx, hostside.ProbeConfig(root, probeUIDBase), platform)
	if err != nil {
		return err
	}
	return hostside.RunProbe(ctx, s, []string{goinit.GVisorProbePath, goinit.GVisorRoleProbe}, goinit.GVisorProbeOutput, probeTimeout/2, "probe sandbox")
}

// probeRoot makes the probe's root: an empty directory owned by
// probeUIDBase (the overlay above it takes the mount points).
func probeRoot(stateDir string) (string, error) {
	root := filepath.Join(stateDir, "probe-root")
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create probe root: %w", err)
	}
	if err := os.Chown(root, probeUIDBase, probeUIDBase); err != nil {
		return "", fmt.Errorf("create probe root: %w", err)
	}
	return root, nil
}
