// Package hostside is what every sandbox backend does from outside its
// sandboxes, whatever runs them: the pipes to a sandbox's init and the
// engine's side of the init protocol (package initproto) with its time
// limits (Conn), the setup every init gets (Setup, Confinement), copying the
// sandbox's output to the job's writers, turning init's report into an
// Outcome, readying a sandbox's cgroup for its job, the steps of a
// sandbox's life every backend takes alike (start or destroy, one job,
// teardown), the start-up probe and its verdict kept for the host's boot
// (ProbeCache), the engine instance names that tell a dead engine's
// leftovers from a live one's and the sweep of those leftovers, the copy of
// the Go init a backend executes, and the starter (StartChild) that forks
// every child with a parent-death signal from a thread that lives as long
// as the engine. For a session sandbox (Config.Session), Conn also speaks a
// session's requests over the control pipe it keeps open (session.go) and
// reads the output pipes for the sandbox's whole life, telling one job's
// output from the next by what the pipe held when init reported
// (sessionout.go).
//
// A backend leaf (namespaces, gvisor, ...) adds only what is its own: how a
// sandbox is started, killed and waited for. Everything an init says is
// untrusted here: messages are bounded in size and time, and a silent init
// is killed.
package hostside
