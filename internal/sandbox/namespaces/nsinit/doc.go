// Package nsinit is the pid 1 of a namespaces sandbox: it builds the mount
// tree, waits for the one job, locks itself and the job down (capabilities,
// cgroup namespace, a seccomp program it is given), runs the job or hands it
// to a pre-started interpreter, enforces the timeout, reaps everything,
// collects return files and reports.
//
// It is kept small on purpose (standard library and x/sys only): it starts
// once per sandbox, and every package a binary links adds start-up work. It
// must never trust what user code left behind, and never reach a host path
// after pivot_root.
package nsinit
