// Package namespaces is the default isolation backend: each sandbox is a tree
// of processes in new user, pid, mount, network, ipc, uts and cgroup
// namespaces, on an overlay of the read-only image with a RAM-backed writable
// layer, inside its own cgroup, behind Docker's seccomp profile. As root, a
// sandbox runs as host uids that own no image file: its overlay's lower
// layer is an idmapped, read-only view of the image (idmap.Views).
//
// The sandbox's pid 1 is a small C init (spawner/c/init.c), run in the child
// the scratchrun-spawn helper (package spawner) clones into the new
// namespaces and cgroup: it builds the mount tree, waits for the one job,
// starts it, enforces the timeout, reaps everything, collects return files
// and reports, in the protocol of package initproto. The engine's side of
// that protocol is package hostside's, as for every backend; this package
// adds what is its own: the spawner, user namespace owners, the cgroup and
// the setup a namespaces init needs (the image's overlay, the kernel's
// per-user limits). The engine side treats everything init says as
// untrusted, because user code runs beside it with the same credentials.
//
// A sandbox created with Config.Session (session.go) is the one exception
// to "one job": its init (spawner/c/session.c) runs jobs one after another,
// each under a keeper process whose tree alone the job's timeout kills, and
// writes and reads files between them with the care user code's leftovers
// call for (no link out of the sandbox's tree, no kernel pseudo-file).
// Such a session forks by its files (fork.go, treecopy.go), copied by a
// process of the engine's own executable placed in the new sandbox's
// cgroup (forkcopier.go), so that the copy counts in the new sandbox's
// memory and never in the engine's.
//
// A sandbox created with Config.Zygote (zygote.go, zygotes.go; as root)
// gets its init from a zygote of its caller's instead of the helper: the
// same spawner and init, running inside an initialized python interpreter
// confined to a pid, network, IPC and mount namespace of its own, whose
// pre-started interpreter is a fork rather than a new program
// (docs/zygotes.md).
//
// It must never expose a host path inside a sandbox, never let a sandbox
// outlive Destroy, and never run a second job in a sandbox that is not a
// session.
package namespaces
