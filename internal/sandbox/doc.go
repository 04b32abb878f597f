// Package sandbox defines what an isolation backend does: create one sandbox,
// run one job in it, and destroy it, reporting honestly whether teardown
// finished. It holds only the interfaces and the types that cross them
// (Config, Job, Outcome, Teardown, the limits a host may not enforce).
//
// Below it, each isolation level is a leaf (namespaces/, gvisor/, later
// microvm/) that imports only downward: initproto/ (the engine <-> init
// protocol), hostside/ (what every backend does from outside its sandbox),
// goinit/ (the Go init), and the host libraries cgroups/ and seccomp/. No
// package here imports a leaf; a new isolation level is one new leaf.
//
// A backend knows nothing of HTTP, MCP, API keys, pools or the request JSON: it
// takes a prepared Job and returns an Outcome. It must never run more than one
// job in a sandbox, unless the sandbox was created with Config.Session: a
// session sandbox runs jobs one after another (Session), each job's
// processes its own to kill at its timeout, the sandbox's files and
// background processes kept between them.
//
// What a backend or sandbox may also do (Emulation, MemoryBudget, CPUMeter, Session)
// is an optional interface, looked up with BackendAs and SandboxAs, never by
// a type assertion: a wrapper (one that counts, one that records) implements
// Unwrap, and the lookup walks through it to what it wraps, so that no
// wrapper hides a memory gauge.
package sandbox
