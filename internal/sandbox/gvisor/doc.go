// Package gvisor is the "gvisor" isolation level: each sandbox is a gVisor
// container, so user code's system calls are served by gVisor's Sentry (an
// application kernel in Go, itself confined by seccomp on the host) rather
// than by the host kernel. It implements the same sandbox.Backend contract
// as package namespaces, with the same protocol to its init (package
// initproto) and the same engine side of it (package hostside); its init is
// the Go one (package goinit, installed as scratchrun-init):
//
//   - Create writes an OCI bundle (the image as root under runsc's in-memory
//     overlay, served from an idmapped view that shows its files as the
//     sandboxes' uids', its own /proc, fresh namespaces, a user namespace
//     mapping root to idmap.SandboxBase, which owns no image file, limits) and starts `runsc run` attached. The
//     container's process is ScratchRun's init, executed from an open file
//     (--exec-fd); its control and status pipes are the container's fds 3
//     and 4 and the engine's output pipes its fds 1 and 2 (--pass-fd). Init
//     mounts inode-limited tmpfs on /tmp, /code and /dev/shm, freezes /proc's
//     writable corners and starts a reaper in a pid namespace below its own,
//     where user code runs and from which init cannot be signalled; both
//     drop to Docker's capabilities minus NET_RAW and MKNOD for user code,
//     install the same seccomp filter as a namespaces sandbox, and wait for
//     the job (warm sandboxes pre-start their interpreter first).
//   - Memory, CPU and host tasks are limited by a cgroup the backend creates
//     below its own parent ("scratchrun-gvisor") and runsc joins; the memory
//     limit has DefaultMemoryOverhead added for the Sentry and gofer. Process
//     and thread counts inside are limited by RLIMIT_NPROC, which the Sentry
//     enforces per user; init counts them in a pids cgroup of the Sentry's to
//     report when the limit was reached. Over the memory limit the host kills
//     the Sentry, and the whole sandbox ends (exit 137).
//   - With egress the sandbox joins the slot's network namespace
//     (--network=sandbox): the Sentry's network stack sends through the
//     slot's veth, so the same nftables policy applies.
//   - Destroy lets runsc remove the container, force-deletes it otherwise,
//     and removes cgroups on every hierarchy and the bundle; New removes what
//     a crashed engine left, and proves with one small sandbox that runsc
//     runs here (KVM platform when it works, else systrap); the verdict is
//     kept for the host's boot (hostside.ProbeCache), so later engines
//     skip the probe and a KVM that hangs costs its timeout once per boot.
//
// A sandbox created with Config.Session implements sandbox.Session (its
// init's session loop is goinit's, with its resident kernels under
// keepers of their own, as the C init's); it has no Forker (ForkKind
// none).
//
// Differences from the namespaces backend that callers may notice: the
// root's writable layer is limited in size but not in inodes; gVisor does
// not shield a pid namespace's init from its own processes' signals, so the
// reaper shields itself (goinit's shield.go): the same signals are dropped
// and the same /proc entries kept from user code, but hidden (empty)
// rather than refused; mounts show "none" as their source; inotify, signal queues and message queues are
// the Sentry's own, bounded by the sandbox's memory, not by the kernel's
// per-user quotas; and system calls are much slower.
//
// It must never write to an image (no bind mounts: runsc's gofer creates
// mount points in the root's directory on disk), never pass anything of the
// engine's environment to runsc or the sandbox, and never touch cgroups,
// runsc state or bundles of an engine that is still running.
package gvisor
