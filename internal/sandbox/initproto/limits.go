package initproto

import "golang.org/x/sys/unix"

// Kernel objects a sandbox could exhaust for the whole host are counted by
// the kernel per user, not per cgroup: inotify instances and watches,
// fanotify groups and marks, queued signals, POSIX message queue bytes,
// locked shared memory. Each count is kept per (user namespace, uid) and
// charged up the chain of user namespaces to the uid that owns each one
// (kernel/ucount.c), so with sandbox namespaces owned by host root, one
// sandbox took all of root's inotify instances and queued signals, and
// host root's inotify_init1 and timer_create failed. The namespaces backend
// gives each sandbox's user namespace an owner of its own (see
// namespaces.Backend), and init bounds the sandbox with the limits below,
// which its user code cannot raise: the /proc/sys/user files are writable
// only with CAP_SYS_RESOURCE in the namespace, and raising a hard rlimit
// takes CAP_SYS_RESOURCE in the host's; neither is in the capabilities
// user code keeps.

// UserNamespaceLimits are the sandbox's /proc/sys/user settings: enough for
// a program that watches a few files (an inotify instance is one watcher:
// a file-watching library, tail -f), and no namespaces at all (system
// calls that would create them are refused anyway). The cgroup namespace
// is the one init itself makes when it locks down. fanotify_init is refused
// by the seccomp profile; these say the same.
var UserNamespaceLimits = []Setting{
	{"max_inotify_instances", 32},
	{"max_inotify_watches", 8192},
	{"max_fanotify_groups", 0},
	{"max_fanotify_marks", 0},
	{"max_user_namespaces", 0},
	{"max_pid_namespaces", 0},
	{"max_net_namespaces", 0},
	{"max_mnt_namespaces", 0},
	{"max_ipc_namespaces", 0},
	{"max_uts_namespaces", 0},
	{"max_time_namespaces", 0},
	{"max_cgroup_namespaces", 1},
}

// KernelRlimits are set, soft and hard alike, on everything in a sandbox.
// They bound what is charged to the user namespace's owner: queued signals
// (1024: a program's timers and real-time signals, never a table), message
// queue bytes (256 KiB: three queues of the default 10 messages of 8 KiB)
// and memory locked in shared memory (8 MiB, the usual default; it is
// charged to the sandbox's memory limit as well).
var KernelRlimits = []Rlimit{
	{unix.RLIMIT_SIGPENDING, 1024},
	{unix.RLIMIT_MSGQUEUE, 256 << 10},
	{unix.RLIMIT_MEMLOCK, 8 << 20},
}

// MaskedPaths are hidden inside /proc (as Docker's default does): they
// expose host kernel state that a sandbox has no need of. Every backend's
// engine side sends them in the setup (SetupMessage.MaskPaths), so that one
// list serves the Go and the C init.
var MaskedPaths = []string{
	"/proc/acpi", "/proc/asound", "/proc/interrupts", "/proc/kcore", "/proc/keys",
	"/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats",
	"/proc/sched_debug", "/proc/scsi",
}

// ReadOnlyPaths are made read-only inside /proc (sent as
// SetupMessage.ReadOnlyPaths).
var ReadOnlyPaths = []string{"/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"}
