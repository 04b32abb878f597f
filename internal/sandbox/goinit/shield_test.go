package goinit

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox/seccomp/bpfload"
)

// The shield filter, on the host's own kernel: a process under it cannot
// signal, pidfd, make a SIGIO owner of or change the limits of a task
// whose id is at most the filter's last (a signal "succeeds" and does
// nothing), and does all of that to a task above it.
func TestShieldFilterKeepsUserCodeOffTheReaper(t *testing.T) {
	guarded, free := sleeper(t), sleeper(t)
	if free.Process.Pid <= guarded.Process.Pid {
		t.Skip("pids wrapped between the two sleepers")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	helper := exec.Command(self, "-test.run=^TestShieldFilterHelper$")
	helper.Env = append(os.Environ(), fmt.Sprintf("GOINIT_SHIELD_TEST=%d,%d", guarded.Process.Pid, free.Process.Pid))
	out, err := helper.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	want := "kill <nil>\ntkill <nil>\nrt_sigqueueinfo <nil>\nprlimit set operation not permitted\nprlimit get <nil>\n" +
		"pidfd_open operation not permitted\nF_SETOWN operation not permitted\nF_SETOWN -pid operation not permitted\n" +
		"F_SETOWN_EX operation not permitted\nFIOSETOWN operation not permitted\nsetpgid operation not permitted\n" +
		"F_SETOWN free <nil>\nkill free <nil>\n"
	if got := string(out); !strings.Contains(got, want) {
		t.Errorf("helper said\n%s\nwant\n%s", got, want)
	}
	var ws unix.WaitStatus
	if pid, err := unix.Wait4(guarded.Process.Pid, &ws, unix.WNOHANG, nil); pid != 0 || err != nil {
		t.Errorf("the shielded task ended: %d %v %v", pid, err, ws)
	}
	if pid, err := unix.Wait4(free.Process.Pid, &ws, 0, nil); pid != free.Process.Pid || err != nil || !ws.Signaled() {
		t.Errorf("the task above the shield was not killed: %d %v %v", pid, err, ws)
	}
}

// sleeper starts a process that waits to be killed.
func sleeper(t *testing.T) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		var ws unix.WaitStatus
		_, _ = unix.Wait4(cmd.Process.Pid, &ws, 0, nil)
	})
	return cmd
}

// TestShieldFilterHelper is the helper process of the test above (it
// skips in a normal run): it installs the filter guarding 1..guarded and
// says what each attempt returned.
func TestShieldFilterHelper(t *testing.T) {
	arg := os.Getenv("GOINIT_SHIELD_TEST")
	if arg == "" {
		t.Skip("the helper of TestShieldFilterKeepsUserCodeOffTheReaper")
	}
	g, f, _ := strings.Cut(arg, ",")
	guarded, _ := strconv.Atoi(g)
	free, _ := strconv.Atoi(f)
	if err := bpfload.Install(shieldProgram(uint32(guarded))); err != nil {
		t.Fatal(err)
	}
	say := func(what string, err error) { fmt.Printf("%s %v\n", what, err) }
	errno := func(_, _ uintptr, e unix.Errno) error {
		if e == 0 {
			return nil
		}
		return e
	}
	say("kill", unix.Kill(guarded, unix.SIGKILL))
	say("tkill", errno(unix.Syscall(unix.SYS_TKILL, uintptr(guarded), uintptr(unix.SIGKILL), 0)))
	var info [128]byte
	fields := (*[3]int32)(unsafe.Pointer(&info[0]))
	fields[0], fields[2] = int32(unix.SIGSEGV), -1
	say("rt_sigqueueinfo", errno(unix.Syscall(unix.SYS_RT_SIGQUEUEINFO, uintptr(guarded), uintptr(unix.SIGSEGV), uintptr(unsafe.Pointer(&info[0])))))
	limit := unix.Rlimit{Cur: 1, Max: 1}
	say("prlimit set", unix.Prlimit(guarded, unix.RLIMIT_NOFILE, &limit, nil))
	say("prlimit get", unix.Prlimit(guarded, unix.RLIMIT_NOFILE, nil, &limit))
	_, err := unix.PidfdOpen(guarded, 0)
	say("pidfd_open", err)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = unix.FcntlInt(uintptr(fds[0]), unix.F_SETOWN, guarded)
	say("F_SETOWN", err)
	_, err = unix.FcntlInt(uintptr(fds[0]), unix.F_SETOWN, -guarded)
	say("F_SETOWN -pid", err)
	owner := struct{ kind, pid int32 }{1, int32(guarded)} // struct f_owner_ex, F_OWNER_PID
	say("F_SETOWN_EX", errno(unix.Syscall(unix.SYS_FCNTL, uintptr(fds[0]), unix.F_SETOWN_EX, uintptr(unsafe.Pointer(&owner)))))
	say("FIOSETOWN", unix.IoctlSetPointerInt(fds[0], fioSetOwn, guarded))
	say("setpgid", unix.Setpgid(0, guarded)) // the kernel's own answer would be ESRCH: no such group
	_, err = unix.FcntlInt(uintptr(fds[0]), unix.F_SETOWN, free)
	say("F_SETOWN free", err)
	say("kill free", unix.Kill(free, unix.SIGKILL))
}
