// Package engine is the local Executor: it validates a request, resolves its
// runtime to an image, admits it when the machine has room (package
// admission, with gauges from the backend's cgroup parent and each
// sandbox's CPU demand), creates a sandbox through a backend, stages the
// code and files, runs it with capped output, collects the result and
// destroys the sandbox. A front end that validated the request already
// hands the Checked to ExecChecked (execapi.CheckedExecutor). The result's
// facts are what the sandbox reported; execapi.Result.Finish words them.
//
// With Config.Sessions on it also holds sessions (execapi.SessionService,
// SessionAdmin; sessions*.go): a sandbox created with sandbox.Config.Session
// that runs a caller's calls one at a time, Python and Node ones in a
// kernel it keeps (package kernel), bash ones in a wrapper that keeps
// exported variables and the directory. A registry binds each to its
// caller (another caller's id is not found, as an unknown one), bounds
// them per caller and in all, remembers ended ones for their owners
// (tombstones), and a sweeper ends them at their idle TTL and lifetime;
// under memory pressure admission's reclaim ends idle ones, largest first,
// after the warm pool gave back what it holds. Their memory needs no
// reservation: it is in the cgroup parent's usage, admission's gauge.
// Off, every session call is refused and SessionPolicy().Enabled is false.
//
// With Config.Zygote on (zygote.go), a Python call of a catalog-built image
// with network none gets its sandbox made on its path from its caller's
// zygote (sandbox.Config.Zygote; docs/zygotes.md) rather than from the
// warm pool, which keeps none for those keys.
//
// It knows nothing of HTTP or MCP. It must never start a sandbox for a request
// that failed validation, and never report state_purged it did not verify.
package engine
