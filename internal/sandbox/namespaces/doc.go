// Package namespaces is the default isolation backend: each sandbox is a tree
// of processes in new user, pid, mount, network, ipc, uts and cgroup
// namespaces, on an overlay of the read-only image with a RAM-backed writable
// layer, inside its own cgroup, behind Docker's seccomp profile.
//
// The sandbox's pid 1 is a small init (package nsinit; the scratchrun-init
// binary, or the engine's own binary re-executed), cloned into its new
// namespaces and cgroup by the scratchrun-spawn helper (package spawner; from
// Go when the helper is missing): it builds the mount tree, waits for the one
// job, starts it, enforces the timeout, reaps everything, collects return
// files and reports.
// The engine side treats everything init says as untrusted, because user code
// runs beside it with the same credentials.
//
// It must never expose a host path inside a sandbox, never let a sandbox
// outlive Destroy, and never run a second job in a sandbox.
package namespaces
