//go:build hostile

package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// quotaHog takes as much as it can of every kernel quota the kernel counts
// per user rather than per cgroup, reports what it got, says HOLDING and
// keeps it all until it is killed.
const quotaHog = pyErrno + `
import signal, sys, time
def err(): return errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno())
fds = []
while len(fds) < 4096:
    fd = libc.inotify_init1(0)
    if fd < 0:
        break
    fds.append(fd)
print("inotify instances:", len(fds), err() if len(fds) < 4096 else "")
paths = []
for d, _, names in os.walk("/usr"):
    paths += [os.path.join(d, n).encode() for n in names]
    if len(paths) >= 20000:
        break
watches, why = 0, ""
for fd in fds:
    wds = set()  # a second path to a watched file gives the same watch
    for p in paths:
        wd = libc.inotify_add_watch(fd, p, 0x2)
        if wd >= 0 and wd not in wds:
            wds.add(wd)
            watches += 1
        elif wd < 0 and err() not in ("ENOENT", "EACCES", "ELOOP"):
            why = err()
            break
    if why or watches >= 400000:
        break
print("inotify watches:", watches, why)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
queued = 0
while queued < 200000 and libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), ctypes.c_void_p(0)) == 0:
    queued += 1
print("queued signals:", queued, err())
queues = 0
while queues < 1000 and libc.mq_open(("/hog%d" % queues).encode(), os.O_CREAT | os.O_RDWR, 0o600, None) >= 0:
    queues += 1
print("message queues:", queues, err())
ctx = ctypes.c_ulong(0)
sys_("io_setup", 206, 65536, ctypes.byref(ctx))
print("HOLDING", flush=True)
time.sleep(120)
`

// quotaProbe does, once, each small thing the hog tried to take all of, and
// prints "name: ok" or the errno.
const quotaProbe = pyErrno + `
import signal
def res(name, ok):
    print(name + ":", "ok" if ok else errno.errorcode.get(ctypes.get_errno(), ctypes.get_errno()))
fd = libc.inotify_init1(0)
res("inotify_init1", fd >= 0)
res("inotify_add_watch", fd >= 0 and libc.inotify_add_watch(fd, b"/tmp", 0x100) >= 0)
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGRTMIN})
res("sigqueue", libc.sigqueue(os.getpid(), int(signal.SIGRTMIN), ctypes.c_void_p(0)) == 0)
class sigevent(ctypes.Structure):
    _fields_ = [("value", ctypes.c_void_p), ("signo", ctypes.c_int), ("notify", ctypes.c_int), ("pad", ctypes.c_int * 12)]
ev, timer = sigevent(None, int(signal.SIGRTMIN) + 1, 0), ctypes.c_void_p()
res("timer_create", libc.timer_create(1, ctypes.byref(ev), ctypes.byref(timer)) == 0)
res("mq_open", libc.mq_open(b"/probe", os.O_CREAT | os.O_RDWR, 0o600, None) >= 0)
ctx = ctypes.c_ulong(0)
sys_("io_setup", 206, 1, ctypes.byref(ctx))
`

// A sandbox that takes all it can of the kernel's per-user quotas (inotify
// instances and watches, queued signals, message queues, the AIO table)
// takes nothing the host or another sandbox needs: beside it, host root and
// a second sandbox each still get an inotify instance and watch, a queued
// signal and a signalling timer, a message queue and (the host) an AIO
// context. In a namespaces sandbox its take is bounded by its own limits.
func TestHostileKernelQuotasStayPerSandbox(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var mu sync.Mutex
		var hogOut strings.Builder
		holding := make(chan struct{})
		var once sync.Once
		hogDone := make(chan error, 1)
		go func() {
			_, err := e.Exec(ctx, execapi.Request{Runtime: "python3.13", Code: quotaHog,
				Limits: execapi.Limits{TimeoutMS: 30000, MemoryMB: 512}}, func(ev execapi.Event) {
				if ev.Kind != execapi.EventStdout {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				hogOut.Write(ev.Data)
				if strings.Contains(hogOut.String(), "HOLDING\n") {
					once.Do(func() { close(holding) })
				}
			})
			hogDone <- err
		}()
		select {
		case <-holding:
		case err := <-hogDone:
			t.Fatalf("the hog ended before holding its quotas: %v (stdout %q)", err, hogOut.String())
		case <-time.After(90 * time.Second):
			t.Fatalf("the hog did not get to hold its quotas: stdout %q", hogOut.String())
		}
		host := hostQuotaProbe()
		second := run(t, e, execapi.Request{Runtime: "python3.13", Code: quotaProbe})
		cancel()
		if err := <-hogDone; !errors.Is(err, context.Canceled) {
			t.Errorf("the hog: %v", err)
		}
		mu.Lock()
		t.Logf("the hog took:\n%s", hogOut.String())
		mu.Unlock()

		for name, err := range host {
			if err != nil {
				t.Errorf("host root beside the hog: %s: %v", name, err)
			}
		}
		got := map[string]string{}
		for _, line := range strings.Split(strings.TrimSpace(second.Stdout), "\n") {
			name, result, _ := strings.Cut(line, ": ")
			got[name] = result
		}
		for _, name := range []string{"inotify_init1", "inotify_add_watch", "sigqueue", "timer_create", "mq_open"} {
			if got[name] != "ok" {
				t.Errorf("a second sandbox beside the hog: %s: %q (stdout %q stderr %q)", name, got[name], second.Stdout, second.Stderr)
			}
		}
		// Kernel AIO is refused in every sandbox: its one table is the
		// host's (see seccomp's unavailableSyscalls).
		if got["io_setup"] != "ENOSYS" {
			t.Errorf("a second sandbox's io_setup: %q, want ENOSYS", got["io_setup"])
		}
		if !isGVisor(e) {
			// Its own limits stopped it (initproto.UserNamespaceLimits and
			// KernelRlimits; three default queues fit in 256 KiB).
			mu.Lock()
			took := hogOut.String()
			mu.Unlock()
			for _, want := range []struct {
				what  string
				most  int
				errno string
			}{{"inotify instances", 32, "EMFILE"}, {"inotify watches", 8192, "ENOSPC"},
				{"queued signals", 1024, "EAGAIN"}, {"message queues", 3, "EMFILE"}} {
				var n int
				var errno string
				at := strings.Index(took, want.what+":")
				if at < 0 {
					t.Errorf("the hog did not report its %s: %q", want.what, took)
					continue
				}
				line := took[at:]
				if _, err := fmt.Sscanf(line, want.what+": %d %s", &n, &errno); err != nil || n < 1 || n > want.most || errno != want.errno {
					t.Errorf("the hog took %q, want at most %d and then %s", strings.SplitN(line, "\n", 2)[0], want.most, want.errno)
				}
			}
			if !strings.Contains(took, "io_setup: ENOSYS") {
				t.Errorf("the hog's io_setup was not refused: %q", took)
			}
		}
	})
}

// sigevent is the kernel's struct sigevent (x/sys/unix has none).
type sigevent struct {
	value  uint64
	signo  int32
	notify int32
	_      [12]int32
}

// hostQuotaProbe does, as this process (host root), one small thing of each
// kind the hog tried to take all of, undoing each at once.
func hostQuotaProbe() map[string]error {
	out := map[string]error{}
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC)
	out["inotify_init1"] = err
	if err == nil {
		_, out["inotify_add_watch"] = unix.InotifyAddWatch(fd, "/", unix.IN_CREATE)
		unix.Close(fd)
	}
	// A timer that would deliver a real-time signal reserves its queued
	// signal when it is made (it is never armed).
	ev := sigevent{signo: 40, notify: 0 /* SIGEV_SIGNAL */}
	var timer int32
	if _, _, e := unix.Syscall(unix.SYS_TIMER_CREATE, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ev)), uintptr(unsafe.Pointer(&timer))); e != 0 {
		out["timer_create"] = e
	} else {
		out["timer_create"] = nil
		unix.Syscall(unix.SYS_TIMER_DELETE, uintptr(timer), 0, 0)
	}
	name := append([]byte(fmt.Sprintf("scratchrun-test-%d", os.Getpid())), 0)
	mq, _, e := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(&name[0])), unix.O_CREAT|unix.O_EXCL|unix.O_RDWR|unix.O_CLOEXEC, 0o600, 0, 0, 0)
	if e != 0 {
		out["mq_open"] = e
	} else {
		out["mq_open"] = nil
		unix.Close(int(mq))
		unix.Syscall(unix.SYS_MQ_UNLINK, uintptr(unsafe.Pointer(&name[0])), 0, 0)
	}
	var aio uint64
	if _, _, e := unix.Syscall(unix.SYS_IO_SETUP, 1, uintptr(unsafe.Pointer(&aio)), 0); e != 0 {
		out["io_setup"] = e
	} else {
		out["io_setup"] = nil
		unix.Syscall(unix.SYS_IO_DESTROY, uintptr(aio), 0, 0)
	}
	return out
}
