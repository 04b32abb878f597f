package microvm

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"
	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// timeouts bound what the engine waits on in a microVM sandbox: a boot
// under software emulation on a loaded machine is slow, never this slow.
var timeouts = hostside.Timeouts{Setup: 60 * time.Second, Grace: 10 * time.Second, Drain: 5 * time.Second}

const (
	// exitTimeout bounds waiting for QEMU to end by itself once the agent
	// has reported (its end resets the guest, which ends QEMU).
	exitTimeout = 10 * time.Second
	// reportTimeout bounds a VM-port answer the agent owes at once.
	reportTimeout = 30 * time.Second
	// seedBytes of fresh randomness reseed each guest.
	seedBytes = 64
	// maxDiagnostics caps what is kept of the guest console and QEMU's own
	// messages.
	maxDiagnostics = 8 << 10
)

// vmSandbox is one virtual machine: QEMU in a cgroup of its own, booted
// from the backend's kernel and initramfs with the image's read-only
// drive, its agent (the Go init) waiting for the job.
type vmSandbox struct {
	id         string
	backend    *Backend
	seq        uint64
	vmmUID     uint32 // QEMU's uid, 0 when it runs as root or has none yet
	group      *cgroups.Group
	vm         VM
	conn       *hostside.Conn
	vmPort     *os.File // the VM port (initproto.VMMessage, VMReport)
	relay      sync.WaitGroup
	endRelay   chan struct{} // closed by Destroy: the relay may close its socket
	link       *guestLink
	console    *tailBuffer // the guest's serial console
	vmmLog     *tailBuffer // QEMU's own messages
	background bool
	// restored: the guest was restored from a saved one, not booted.
	restored bool
	// spec is the machine as started (a fork's copy has the same one,
	// with files of its own).
	spec MachineSpec

	ran       bool
	destroyed bool
	teardown  sandbox.Teardown
}

var _ hostside.Host = (*vmSandbox)(nil)

// ID implements sandbox.Sandbox.
func (s *vmSandbox) ID() string { return s.id }

// guestMemoryMB is the guest's RAM for a sandbox of cfg: its memory limit
// (which the guest cgroup of user code holds) plus the guest's own
// overhead (kernel, agent, initramfs, the image's page cache).
func (b *Backend) guestMemoryMB(cfg sandbox.Config) int64 {
	mem := cfg.MemoryBytes
	if mem <= 0 {
		mem = 512 << 20
	}
	return (mem + b.guestOverhead + (1<<20 - 1)) >> 20
}

// vcpus is the number of virtual CPUs for a CPU limit in cores.
func vcpus(cpus float64) int {
	if cpus <= 1 {
		return 1
	}
	return int(math.Ceil(cpus))
}

// start boots the machine and waits until its agent reports the sandbox
// ready.
func (s *vmSandbox) start(ctx context.Context, cfg sandbox.Config, accel string) error {
	b := s.backend
	drive, err := b.images.path(cfg.Image)
	if err != nil {
		return err
	}
	memMB := b.guestMemoryMB(cfg)
	if b.cgroups != nil {
		limits := cgroups.Limits{MemoryBytes: memMB<<20 + b.hostOverhead, MaxPids: vmmPids, CPUs: cfg.CPUs, Background: cfg.Background}
		if s.group, err = b.cgroups.Create(s.id, limits); err != nil {
			return err
		}
	}
	cred, err := s.vmmCredential()
	if err != nil {
		return err
	}
	spec := MachineSpec{
		Accel: accel, Kernel: b.kernel.Image, Initrd: b.initramfs, Cmdline: kernelCmdline(),
		MemoryMB: memMB, CPUs: vcpus(cfg.CPUs), Drive: drive, Credential: cred,
	}
	pipes, vmEnds, err := s.ports(&spec)
	if err != nil {
		return err
	}
	defer hostside.CloseAll(vmEnds...)
	// From here the Conn owns the engine's ends: Destroy closes them (which
	// also ends the control relay), whatever fails below.
	s.conn = hostside.NewConnWith(s, timeouts, pipes)
	boot := initproto.VMMessage{Now: time.Now(), Seed: make([]byte, seedBytes),
		MemoryBytes: cfg.MemoryBytes, MaxPids: cfg.MaxPids, CPUMillis: int64(cfg.CPUs * 1000)}
	if _, err := rand.Read(boot.Seed); err != nil {
		return err
	}
	if cfg.Network != nil {
		if s.link, err = attachTap(cfg.Network.NetNSFD); err != nil {
			return err
		}
		spec.Tap, spec.MAC = s.link.Tap, guestMAC(s.seq)
		boot.Address, boot.Gateway = s.link.Address, s.link.Gateway
	}
	var join func(int) error
	if s.group != nil {
		join = s.group.AddProcess
	}
	if spec.Tap == nil && b.snapshots != nil {
		spec.Incoming = b.snapshots.restore(spec)
	}
	if spec.Incoming != nil {
		s.restored = true
		defer spec.Incoming.Close()
	}
	s.spec = spec
	if s.vm, err = b.vmm.Start(spec, join); err != nil {
		return fmt.Errorf("%w%s", err, s.Diagnostics())
	}
	hostside.CloseAll(vmEnds...)
	if s.link != nil {
		// QEMU holds the tap now; the device goes when it exits.
		s.link.Tap.Close()
		s.link.Tap = nil
	}
	if !s.restored {
		// A restored guest said hello before it was saved.
		var hello initproto.VMReport
		if err := s.readReport(ctx, timeouts.Setup, &hello); err != nil {
			return fmt.Errorf("the guest did not boot: %w%s", err, s.Diagnostics())
		}
		if spec.Tap == nil && b.snapshots != nil {
			if path, ok := b.snapshots.claim(spec); ok {
				err := s.saveAndResume(path)
				b.snapshots.saved(spec, path, err == nil)
				if err != nil {
					b.opts.Logger.Warn("saving a booted guest for restores", "err", err)
				}
			}
		}
	}
	if err := initproto.WriteMessage(s.vmPort, boot); err != nil {
		return fmt.Errorf("send the guest its boot message: %w%s", err, s.Diagnostics())
	}
	setup := hostside.Setup(cfg, b.confinement)
	setup.WritableBytes = cfg.WritableBytes
	// The agent locks down before it reports ready, warm or not, as
	// gVisor's init does: one order of steps.
	setup.LockDownEarly = true
	setup.Session = cfg.Session
	if err := s.conn.Setup(ctx, setup); err != nil {
		return err
	}
	if !cfg.Session {
		return nil
	}
	// A session's limits are the sandbox's, which the boot message set:
	// the agent waits for this one exchange before its first request.
	if err := s.sendLimits(ctx, 0); err != nil {
		return err
	}
	s.conn.StartSession()
	return nil
}

// saveAndResume saves the booted guest (its agent waiting for the boot
// message) to path and lets it run on.
func (s *vmSandbox) saveAndResume(path string) error {
	if err := save(s.vm, path); err != nil {
		return err
	}
	return s.vm.Resume()
}

// ports makes a connected socket pair for each of the guest's ports and
// the console, adds the VM's ends to spec and returns the engine's ends as
// the Pipes every backend's Conn speaks over. The control stream goes
// through a relay (see relayControl).
func (s *vmSandbox) ports(spec *MachineSpec) (*hostside.Pipes, []*os.File, error) {
	var vmEnds, engineEnds []*os.File
	fail := func(err error) (*hostside.Pipes, []*os.File, error) {
		hostside.CloseAll(append(vmEnds, engineEnds...)...)
		return nil, nil, err
	}
	ends := map[string]*os.File{}
	for _, name := range append([]string{"console"}, goinit.MicroVMPorts...) {
		engine, vm, err := socketPair()
		if err != nil {
			return fail(err)
		}
		vmEnds, engineEnds = append(vmEnds, vm), append(engineEnds, engine)
		ends[name] = engine
		if name == "console" {
			spec.Console = vm
		} else {
			spec.Ports = append(spec.Ports, Port{Name: name, File: vm})
		}
	}
	s.console, s.vmmLog = &tailBuffer{max: maxDiagnostics}, &tailBuffer{max: maxDiagnostics}
	spec.Stderr = s.vmmLog
	go func() {
		_, _ = io.Copy(s.console, ends["console"])
		ends["console"].Close()
	}()
	s.vmPort = ends[goinit.PortVM]
	control, err := s.relayControl(ends[goinit.PortControl])
	if err != nil {
		return fail(err)
	}
	return &hostside.Pipes{Control: control, Status: ends[goinit.PortStatus],
		Stdout: ends[goinit.PortStdout], Stderr: ends[goinit.PortStderr]}, vmEnds, nil
}

// relayControl returns a pipe whose contents reach socket, which is
// shut down for writing (not closed) when the pipe's write end is closed.
// hostside.Conn closes the control stream after the job to say that
// nothing else comes; closing the socket itself would make QEMU drop the
// part of the job the guest has not read yet (it disconnects the port on
// the hang-up), where a shutdown lets it read to the end first.
func (s *vmSandbox) relayControl(socket *os.File) (*os.File, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	s.endRelay = make(chan struct{})
	s.relay.Add(1)
	go func() {
		defer s.relay.Done()
		_, _ = io.Copy(socket, r)
		r.Close()
		if raw, err := socket.SyscallConn(); err == nil {
			_ = raw.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_WR) })
		}
		// The socket stays open until the sandbox is destroyed (closing it
		// would hang up on data still unread).
		<-s.endRelay
		socket.Close()
	}()
	return w, nil
}

// readReport reads one VMReport within timeout (or until ctx ends).
func (s *vmSandbox) readReport(ctx context.Context, timeout time.Duration, r *initproto.VMReport) error {
	deadline := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	_ = s.vmPort.SetReadDeadline(deadline)
	return initproto.ReadMessage(s.vmPort, initproto.MaxVMMessageBytes, r)
}

// Run implements sandbox.Sandbox.
func (s *vmSandbox) Run(ctx context.Context, job sandbox.Job) (sandbox.Outcome, error) {
	if err := hostside.UseOnce(&s.ran, job); err != nil {
		return sandbox.Outcome{}, err
	}
	if s.destroyed || s.vm == nil || s.exited() {
		return sandbox.Outcome{}, fmt.Errorf("sandbox %s is no longer running%s", s.id, s.Diagnostics())
	}
	if err := hostside.PrepareGroup(s.group, s.background, 0); err != nil {
		return sandbox.Outcome{}, err
	}
	if err := s.sendLimits(ctx, job.MemoryBytes); err != nil {
		return sandbox.Outcome{}, err
	}
	return s.conn.Run(ctx, job)
}

// sendLimits gives the agent the job's memory limit (0: the sandbox's)
// and waits for it to be applied.
func (s *vmSandbox) sendLimits(ctx context.Context, memory int64) error {
	limits := initproto.VMMessage{MemoryBytes: memory}
	if err := initproto.WriteMessage(s.vmPort, limits); err != nil {
		return fmt.Errorf("send the guest the job's limits: %w%s", err, s.Diagnostics())
	}
	var answer initproto.VMReport
	if err := s.readReport(ctx, reportTimeout, &answer); err != nil {
		return fmt.Errorf("the guest did not take the job's limits: %w%s", err, s.Diagnostics())
	}
	if answer.Error != "" {
		return fmt.Errorf("%w: %s", sandbox.ErrLimitBelowUsage, answer.Error)
	}
	return nil
}

// exited reports whether QEMU has exited.
func (s *vmSandbox) exited() bool { return hostside.Ended(s.vm.Done()) }

// Kill implements hostside.Host: QEMU is killed, and the guest with it.
func (s *vmSandbox) Kill() {
	if s.vm != nil {
		s.vm.Kill()
	}
}

// Settle implements hostside.Host: the agent ends after its result, which
// resets the guest and ends QEMU; a VM that does not end by itself is
// killed.
func (s *vmSandbox) Settle() { s.waitExit(exitTimeout) }

func (s *vmSandbox) waitExit(timeout time.Duration) {
	if s.vm == nil {
		return
	}
	hostside.WaitOrKill(s.vm.Done(), timeout, s.vm.Kill)
}

// Measure implements hostside.Host. The guest kernel enforces the job's
// memory and process limits in its own cgroup and the agent reports what
// they did (before its result); a memory kill of QEMU itself by the host
// cgroup ends the whole sandbox.
func (s *vmSandbox) Measure(out *sandbox.Outcome, res initproto.ResultMessage) {
	var report initproto.VMReport
	if err := s.readReport(context.Background(), time.Second, &report); err == nil {
		out.OOMKilled = report.OOMKills > 0
		out.ForkFailures = int64(report.ForkFailures)
		out.PidsLimitHit = report.ForkFailures > 0 || res.ProcessLimitHit
	}
	if s.group != nil && s.group.OOMKills() > 0 {
		out.OOMKilled = true
	}
}

// Diagnostics implements hostside.Host: the end of the guest's console
// and of QEMU's own messages.
func (s *vmSandbox) Diagnostics() string {
	var d string
	if s.vmmLog != nil {
		if msg := s.vmmLog.String(); msg != "" {
			d += " (qemu: " + msg + ")"
		}
	}
	if s.console != nil {
		if msg := s.console.String(); msg != "" {
			d += " (guest console: " + msg + ")"
		}
	}
	return d
}

// Destroy implements sandbox.Sandbox: QEMU is killed and reaped (the
// guest, its RAM and every file system in it go with it; the image's drive
// was read-only and nothing else of the guest is on the host's disks), the
// sockets are closed, and the cgroup is emptied and removed. Purged is true
// only when all of that is verified.
func (s *vmSandbox) Destroy() sandbox.Teardown {
	if s.destroyed {
		return s.teardown
	}
	s.destroyed = true
	var errs []error
	gone := true
	if s.vm != nil {
		s.vm.Kill()
		select {
		case <-s.vm.Done():
		case <-time.After(exitTimeout):
			gone = false
			errs = append(errs, fmt.Errorf("QEMU (pid %d) did not end after SIGKILL", s.vm.Pid()))
		}
	}
	if s.vmmUID != 0 && gone {
		// A QEMU still running keeps its uid from every later VM.
		s.backend.uids.release(s.vmmUID)
	}
	if s.conn != nil {
		_ = s.conn.Close()
	}
	if s.endRelay != nil {
		close(s.endRelay)
		s.relay.Wait()
	}
	if s.vmPort != nil {
		s.vmPort.Close()
	}
	if s.link != nil && s.link.Tap != nil {
		s.link.Tap.Close()
	}
	if err := hostside.DestroyGroup(s.group); err != nil {
		errs = append(errs, err)
	}
	s.teardown = hostside.TeardownOf(errs...)
	return s.teardown
}

// MemoryUsage implements sandbox.Sandbox: what QEMU's cgroup uses (the
// guest's RAM as far as it has touched it, and QEMU itself).
func (s *vmSandbox) MemoryUsage() int64 { return hostside.GroupMemory(s.group) }

// vmmCredential is who QEMU runs as: an unprivileged uid of its own per
// sandbox, among every live VM of the host (no two VMMs can signal or
// trace each other, and one taken over by its guest holds no host
// privilege), with the group of /dev/kvm when the machine uses KVM. The
// uid is the sandbox's until Destroy has seen QEMU gone (vmmUIDs).
func (s *vmSandbox) vmmCredential() (*syscall.Credential, error) {
	b := s.backend
	if b.vmmAsRoot {
		return nil, nil
	}
	id, err := b.uids.acquire()
	if err != nil {
		return nil, err
	}
	s.vmmUID = id
	c := &syscall.Credential{Uid: id, Gid: id, NoSetGroups: false}
	if b.kvmGroup >= 0 {
		c.Groups = []uint32{uint32(b.kvmGroup)}
	}
	return c, nil
}

// vmmPids bounds QEMU's threads (vCPUs, I/O workers, RCU) on the host.
const vmmPids = 256

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append([]byte(nil), t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
