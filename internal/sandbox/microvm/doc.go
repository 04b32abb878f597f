// Package microvm is the "microvm" isolation level: every sandbox is a
// virtual machine with its own Linux kernel, booted for one call and
// destroyed after it. It implements the same sandbox.Backend contract as
// packages namespaces and gvisor, with the same protocol to its init
// (package initproto) and the same engine side of it (package hostside);
// its init is the Go one (package goinit), run as the guest's pid 1.
//
//   - The VMM is QEMU (behind the small VMM interface), with a cut-down
//     q35 machine (its microvm type hangs some boots under software
//     emulation, see QEMUVMM), KVM where /dev/kvm can boot a guest (probed at start)
//     and software emulation (TCG) otherwise, said at start and in
//     GET /v1/runtimes. QEMU runs as an unprivileged uid of its own per
//     sandbox, taken host-wide (vmmuid.go: no two live VMs share one,
//     whichever engine started them), under its own seccomp filter
//     (-sandbox), in a host cgroup that bounds it from outside, and dies
//     with the engine (started by hostside.StartChild, whose thread lives
//     as long as the engine).
//   - The guest boots Debian's cloud kernel (scripts/install-microvm.sh
//     caches it) with an initramfs of the Go init and the few modules it
//     loads (virtio PCI, block, serial ports, EROFS, overlayfs, net). Its
//     root is the runtime image as a read-only EROFS drive, built once per
//     image through an idmapped mount (so the guest sees root-owned files)
//     and cached in the cache directory, under an overlay whose writable
//     layer is guest RAM: nothing the guest writes reaches the host.
//   - The protocol's control and status streams and the program's stdout
//     and stderr are virtio-serial ports, each backed by one end of a
//     socket pair the engine made (no socket file anywhere); a fifth port
//     carries the VM's own messages (initproto.VMMessage and VMReport):
//     the clock, a fresh random seed (reseeding the guest's generator), the
//     limits of the guest cgroup user code runs in, and what that cgroup
//     saw (out-of-memory kills, refused forks).
//   - Limits: the guest's RAM is the memory limit plus an overhead; inside,
//     a cgroup holds the job's memory_mb (the guest kernel's own OOM killer
//     gives 137), processes and CPU; vCPUs follow the CPU limit. The agent
//     enforces the timeout, and the engine kills QEMU at the timeout plus a
//     grace period.
//   - Egress: a tap device in the call's network slot, bridged with the
//     slot's veth; the guest takes the slot's address, so the host's
//     nftables policy applies unchanged.
//   - Destroy kills and reaps QEMU (the guest and its RAM go with it),
//     closes the sockets and removes the cgroup; nothing else of a sandbox
//     exists on the host.
//
// A sandbox created with Config.Session implements sandbox.Session (the
// agent's session loop is goinit's): the guest cgroup's limits are the
// session's, exchanged once, and each job's end reports what they did
// during it. Jobs for a kept kernel (Job.Resident) go to goinit's
// resident kernels, as on the gVisor level. A session is a sandbox.Forker of ForkKind
// "memory" (fork.go): between jobs its machine is saved and restored as a
// new session sandbox whose processes and memory are the parent's at the
// fork, woken with the time and a fresh seed.
//
// It must never write to an image, pass anything of the engine's
// environment to QEMU or the guest, or touch another live engine's
// cgroups.
package microvm
