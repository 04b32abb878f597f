// Package nsinit is the Go sandbox init, pid 1 of a gVisor sandbox inside
// runsc: it finishes the sandbox's file systems, waits for the one job,
// locks itself and the job down (capabilities, a seccomp program it is
// given), runs the job or hands it to a pre-started interpreter, enforces
// the timeout, reaps everything, collects return files and reports.
//
// It also defines the protocol between the engine and every init (the
// messages and their binary form, wire.go), and the /proc paths every
// sandbox hides. The namespaces backend's init speaks the same protocol but
// is C (spawner/c/init.c), run by the spawner helper without an exec.
//
// It is kept small on purpose (standard library and x/sys only): it starts
// once per sandbox, and every package a binary links adds start-up work. It
// must never trust what user code left behind.
package nsinit
