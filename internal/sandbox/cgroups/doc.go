// Package cgroups creates, limits, inspects and removes the control group of one
// sandbox, on cgroup v1 (each controller its own hierarchy, as on this project's
// build machines) and on cgroup v2 (the unified hierarchy most hosts run).
//
// It is written by hand on purpose: the only well-kept library for this
// (containerd/cgroups) drags in eBPF device filters, D-Bus and systemd, while a
// sandbox needs five files per version. It must never touch a cgroup outside
// its own parent directory ("scratchrun" by default), except, in a cgroup v2
// delegated to an unprivileged engine, the leaf it moves the engine into and
// the delegated group's cgroup.subtree_control (delegate.go).
package cgroups
