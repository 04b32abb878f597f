package goinit

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// shieldedSignals are those a Go program dies of, or stops at, when another
// process sends them: the runtime exits on SIGQUIT (after printing every
// goroutine), throws on SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP and SIGSYS
// sent by kill(2), and leaves the rest at their default action, which ends
// or stops the process. The others (SIGCHLD, SIGURG, SIGWINCH, real-time
// signals...) it already shrugs off.
var shieldedSignals = []os.Signal{
	syscall.SIGHUP, syscall.SIGINT, syscall.SIGQUIT, syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT,
	syscall.SIGBUS, syscall.SIGFPE, syscall.SIGUSR1, syscall.SIGSEGV, syscall.SIGUSR2, syscall.SIGPIPE,
	syscall.SIGALRM, syscall.SIGTERM, syscall.SIGSTKFLT, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU,
	syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGVTALRM, syscall.SIGPWR, syscall.SIGSYS,
}

// unhandledSignals are the real-time signals the runtime neither handles
// nor lets os/signal handle (glibc's SIGCANCEL, and musl's SIGSYNCCALL,
// which is glibc's SIGRTMIN): left at their default action, one kill(2)
// ends the process.
var unhandledSignals = []syscall.Signal{32, 34}

// shieldFromSignals makes the process outlive shieldedSignals and
// unhandledSignals sent by other processes. shieldedSignals are caught into
// a channel nobody reads (the runtime drops what does not fit), not
// ignored: an ignored signal stays ignored in every program started after
// it, across exec, where a caught one goes back to its default.
// unhandledSignals can only be ignored, so startWithDefaultSignals must
// start every program. What cannot be shielded: SIGKILL, SIGSTOP, and a
// fault signal sent with a made-up origin (rt_sigqueueinfo), which the
// runtime takes for a real fault; the reaper's design covers those
// (reaper.go).
func shieldFromSignals() {
	signal.Notify(make(chan os.Signal, 1), shieldedSignals...)
	setDisposition(unhandledSignals, sigIgn)
}

// Dispositions for setDisposition.
const (
	sigDfl = 0
	sigIgn = 1
)

// kernelSigaction is the x86_64 kernel's struct sigaction.
type kernelSigaction struct {
	handler  uintptr
	flags    uint64
	restorer uintptr
	mask     uint64
}

// setDisposition sets sigs to SIG_DFL or SIG_IGN with rt_sigaction itself:
// neither os/signal nor x/sys/unix offers it for signals the runtime does
// not manage, and the runtime never touches these.
func setDisposition(sigs []syscall.Signal, disposition uintptr) {
	act := kernelSigaction{handler: disposition}
	for _, sig := range sigs {
		_, _, _ = syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	}
}

// startWithDefaultSignals runs start (which forks and executes a program)
// with unhandledSignals at their defaults, so that the program starts with
// them so; they are ignored again right after. Nothing of user code runs
// at the moments programs are started, so nothing can send them meanwhile.
func startWithDefaultSignals(start func() (int, error)) (int, error) {
	setDisposition(unhandledSignals, sigDfl)
	defer setDisposition(unhandledSignals, sigIgn)
	return start()
}
