package microvm

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/goinit"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// QEMUVMM runs machines with QEMU's q35 machine type cut down (no SATA,
// SMBus or VMware port; -nodefaults: no VGA, network or disks but ours),
// virtio over PCI. Its microvm type (virtio over MMIO, no firmware) was
// the first choice, but under software emulation here Debian's kernel hung
// early in 1 of 5 to 8 boots of microvm (before its first message; with
// pit=on,pic=on,rtc=on and no_timer_check, without which it hung every
// time), and in none of 28 of q35, which boots as fast (about 1.7 s to a
// tiny init either way).
type QEMUVMM struct {
	// Binary is qemu-system-x86_64's path.
	Binary string
	// TBMiB caps software emulation's translation cache (QEMU's default is
	// a gigabyte of address space, committed as code is translated).
	TBMiB int
}

// Name implements VMM.
func (q *QEMUVMM) Name() string { return "qemu" }

// args is QEMU's command line for spec, given the descriptor numbers the
// files will have in the child (see Start).
func (q *QEMUVMM) args(spec MachineSpec, fds map[*os.File]int) []string {
	fd := func(f *os.File) string { return strconv.Itoa(fds[f]) }
	a := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot", "-S",
		"-M", "q35,sata=off,smbus=off,vmport=off",
		// QEMU's own system-call filter: a guest that took over the VMM
		// still cannot execute programs, change privileges or limits.
		"-sandbox", "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
		"-smp", strconv.Itoa(spec.CPUs), "-m", strconv.FormatInt(spec.MemoryMB, 10),
		"-kernel", spec.Kernel, "-initrd", spec.Initrd, "-append", spec.Cmdline,
		"-chardev", "socket,id=console,fd=" + fd(spec.Console), "-serial", "chardev:console",
		"-drive", "id=root,file=" + spec.Drive + ",format=raw,if=none,readonly=on",
		"-device", "virtio-blk-pci,drive=root",
		"-device", "virtio-serial-pci,max_ports=" + strconv.Itoa(len(spec.Ports)+1),
	}
	if spec.Accel == AccelKVM {
		a = append(a, "-accel", "kvm", "-cpu", "host")
	} else {
		a = append(a, "-accel", fmt.Sprintf("tcg,tb-size=%d", q.TBMiB))
	}
	for i, p := range spec.Ports {
		id := "port" + strconv.Itoa(i)
		a = append(a, "-chardev", "socket,id="+id+",fd="+fd(p.File), "-device", "virtserialport,chardev="+id+",name="+p.Name)
	}
	if spec.Tap != nil {
		a = append(a, "-netdev", "tap,id=net,fd="+fd(spec.Tap), "-device", "virtio-net-pci,netdev=net,mac="+spec.MAC)
	}
	if spec.Incoming != nil {
		a = append(a, "-incoming", "fd:"+fd(spec.Incoming))
	}
	return a
}

// qemuVM is one QEMU process and its monitor (QMP).
type qemuVM struct {
	cmd  *exec.Cmd
	qmp  *qmp
	done chan struct{}
}

// Start implements VMM.
func (q *QEMUVMM) Start(spec MachineSpec, join func(pid int) error) (VM, error) {
	monitor, qemuEnd, err := socketPair()
	if err != nil {
		return nil, err
	}
	defer qemuEnd.Close()
	files := []*os.File{qemuEnd, spec.Console}
	for _, p := range spec.Ports {
		files = append(files, p.File)
	}
	for _, f := range []*os.File{spec.Tap, spec.Incoming} {
		if f != nil {
			files = append(files, f)
		}
	}
	fds := map[*os.File]int{}
	for i, f := range files {
		fds[f] = 3 + i
	}
	args := append(q.args(spec, fds), "-chardev", "socket,id=qmp,fd="+strconv.Itoa(fds[qemuEnd]), "-mon", "chardev=qmp,mode=control")
	cmd := &exec.Cmd{
		Path:       q.Binary,
		Args:       append([]string{q.Binary}, args...),
		Env:        []string{"PATH=/usr/bin:/bin"},
		Dir:        "/",
		ExtraFiles: files,
		Stdout:     spec.Stderr,
		Stderr:     spec.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			// A VM never outlives its engine, and stays out of the
			// engine's session and process group.
			Pdeathsig:  syscall.SIGKILL,
			Setsid:     true,
			Credential: spec.Credential,
		},
	}
	// The parent-death signal must follow the engine, not this thread.
	if err := hostside.StartChild(cmd); err != nil {
		monitor.Close()
		return nil, fmt.Errorf("start %s: %w", q.Binary, err)
	}
	vm := &qemuVM{cmd: cmd, qmp: &qmp{f: monitor, r: bufio.NewReader(monitor)}, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		monitor.Close()
		close(vm.done)
	}()
	fail := func(err error) (VM, error) {
		vm.Kill()
		<-vm.done
		return nil, err
	}
	if join != nil {
		if err := join(cmd.Process.Pid); err != nil {
			return fail(err)
		}
	}
	if err := vm.qmp.handshake(); err != nil {
		return fail(fmt.Errorf("QEMU's monitor: %w", err))
	}
	if _, err := vm.qmp.execute("cont", nil); err != nil {
		return fail(fmt.Errorf("QEMU's monitor: %w", err))
	}
	return vm, nil
}

func (v *qemuVM) Pid() int              { return v.cmd.Process.Pid }
func (v *qemuVM) Done() <-chan struct{} { return v.done }

// Kill implements VM.
func (v *qemuVM) Kill() { _ = v.cmd.Process.Signal(syscall.SIGKILL) }

// saveTimeout bounds writing a snapshot (a few hundred megabytes at most,
// mostly zero pages).
const saveTimeout = 2 * time.Minute

// Save implements VM: QEMU migrates the machine into f (handed over on the
// monitor's socket) and leaves it stopped.
func (v *qemuVM) Save(f *os.File) error {
	if err := v.qmp.sendFD("snapshot", f); err != nil {
		return err
	}
	if _, err := v.qmp.execute("migrate", map[string]any{"uri": "fd:snapshot"}); err != nil {
		return err
	}
	deadline := time.Now().Add(saveTimeout)
	for time.Now().Before(deadline) {
		ret, err := v.qmp.execute("query-migrate", nil)
		if err != nil {
			return err
		}
		var st struct {
			Status    string `json:"status"`
			ErrorDesc string `json:"error-desc"`
		}
		_ = json.Unmarshal(ret, &st)
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("QEMU could not save the machine: %s %s", st.Status, st.ErrorDesc)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return errors.New("QEMU did not save the machine in time")
}

// Resume implements VM.
func (v *qemuVM) Resume() error {
	_, err := v.qmp.execute("cont", nil)
	return err
}

// qmp is a minimal QEMU Machine Protocol client: one JSON object a line,
// commands answered in order, events skipped.
type qmp struct {
	f *os.File
	r *bufio.Reader
}

// qmpTimeout bounds one monitor exchange.
const qmpTimeout = 30 * time.Second

func (m *qmp) handshake() error {
	_ = m.f.SetReadDeadline(time.Now().Add(qmpTimeout))
	if _, err := m.r.ReadBytes('\n'); err != nil { // the greeting
		return err
	}
	_, err := m.execute("qmp_capabilities", nil)
	return err
}

// execute runs one command and returns its "return" value.
func (m *qmp) execute(command string, args map[string]any) (json.RawMessage, error) {
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	line, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	if _, err := m.f.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return m.answer(command)
}

func (m *qmp) answer(command string) (json.RawMessage, error) {
	_ = m.f.SetReadDeadline(time.Now().Add(qmpTimeout))
	for {
		line, err := m.r.ReadBytes('\n')
		if err != nil {
			return nil, fmt.Errorf("%s: %w", command, err)
		}
		var msg struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Desc string `json:"desc"`
			} `json:"error"`
		}
		if err := json.Unmarshal(line, &msg); err != nil {
			return nil, fmt.Errorf("%s: %w", command, err)
		}
		if msg.Error != nil {
			return nil, fmt.Errorf("%s: %s", command, msg.Error.Desc)
		}
		if msg.Return != nil {
			return msg.Return, nil
		}
		// An event: not an answer.
	}
}

// sendFD hands f to QEMU under name (QMP getfd, the descriptor riding on
// the command's message).
func (m *qmp) sendFD(name string, f *os.File) error {
	line, _ := json.Marshal(map[string]any{"execute": "getfd", "arguments": map[string]any{"fdname": name}})
	raw, err := m.f.SyscallConn()
	if err != nil {
		return err
	}
	var sendErr error
	err = raw.Write(func(fd uintptr) bool {
		sendErr = unix.Sendmsg(int(fd), append(line, '\n'), unix.UnixRights(int(f.Fd())), nil, 0)
		return !errors.Is(sendErr, unix.EAGAIN)
	})
	if err == nil {
		err = sendErr
	}
	if err != nil {
		return fmt.Errorf("getfd: %w", err)
	}
	_, err = m.answer("getfd")
	return err
}

// socketPair returns two connected stream sockets, each an *os.File.
func socketPair() (*os.File, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socketpair: %w", err)
	}
	// The engine's end is non-blocking, so that reads on it take deadlines
	// and end when it is closed.
	if err := unix.SetNonblock(fds[0], true); err != nil {
		unix.Close(fds[0])
		unix.Close(fds[1])
		return nil, nil, err
	}
	return os.NewFile(uintptr(fds[0]), "engine"), os.NewFile(uintptr(fds[1]), "vm"), nil
}

// kernelCmdline is what every guest boots with: quiet (a serial console
// is slow to emulate), no timer check (software emulation's timer
// interrupts come late, and the check then costs a while), a panic
// (init's end) that resets the machine at once (which ends QEMU, started
// with -no-reboot), no IPv6 (egress is IPv4 only, as for every sandbox),
// and the agent's role after "--".
func kernelCmdline(extra ...string) string {
	words := append([]string{"console=ttyS0", "quiet", "panic=-1", "reboot=t", "no_timer_check", "ipv6.disable=1"}, extra...)
	return strings.Join(append(words, "--", goinit.MicroVMRole), " ")
}
