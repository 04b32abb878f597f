// Package engine is the local Executor: it validates a request, resolves its
// runtime to an image, admits it when the machine has room (package
// admission, with gauges from the backend's cgroup parent and each
// sandbox's CPU demand), creates a sandbox through a backend, stages the
// code and files, runs it with capped output, collects the result and
// destroys the sandbox. A front end that validated the request already
// hands the Checked to ExecChecked (execapi.CheckedExecutor). The result's
// facts are what the sandbox reported; execapi.Result.Finish words them.
//
// It knows nothing of HTTP or MCP. It must never start a sandbox for a request
// that failed validation, and never report state_purged it did not verify.
package engine
