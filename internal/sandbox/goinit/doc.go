// Package goinit is the Go sandbox init: pid 1 of a gVisor sandbox inside
// runsc, and pid 1 of a microVM sandbox's guest (microvm.go: the same init
// with a boot in front). It finishes the
// sandbox's file systems, waits for the one job, locks itself and the job
// down (capabilities, a seccomp program it is given), runs the job or hands
// it to a pre-started interpreter, enforces the timeout, reaps everything,
// collects return files and reports, in the protocol of package initproto.
// A session sandbox (SetupMessage.Session) runs jobs one after another
// instead (session.go): each under a keeper, a child subreaper the reaper
// starts from the same image (keeper.go), so that a timeout or cancel
// kills that job's processes and no others (session_reaper.go); files
// written and read between jobs follow the C init's rules (safewrite.go,
// collect.go). A job for a resident kernel (initproto.ResidentJob) goes to
// a kernel the reaper keeps per key under a keeper of its own
// (kernel.go, kernel_keeper.go), as the C init's kernel.c does.
// The namespaces backend's init speaks the same protocol but is C
// (namespaces/spawner/c), run by the spawner helper without an exec.
//
// It is not part of any backend: backends start it (cmd/scratchrun-init is
// its main), none imports another's. It is kept small on purpose (standard
// library and x/sys only): it starts once per sandbox, and every package a
// binary links adds start-up work. It must never trust what user code left
// behind.
package goinit
