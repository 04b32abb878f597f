// Package frontend is a cluster's remote Executor: an execapi.Service
// that places each call on one worker over NATS, so that `scratchrun
// serve --nats` is the same HTTP and MCP front end (package httpapi) with
// no engine of its own.
//
// It keeps a view of the live workers from the registry (package
// cluster's key-value bucket, watched), describes the cluster as the union
// of what they offer, and places a call on a worker that offers its
// runtime, preferring the emptiest of a few sampled at random (power of K
// choices), trying the next when one refuses, and refusing with 429 and
// a Retry-After from the workers' own estimates when all refuse for the
// queue wait. Once a worker has the call's go, the call is that worker's:
// a worker that falls silent (no beat for a few seconds, or a new process
// of its id) is an execapi.WorkerLostError for the caller, never a run
// elsewhere.
//
// With sessions on it is also an execapi.SessionService and SessionAdmin
// (sessions.go): an open is placed as a call; every later operation goes
// to the worker the session's ref names, and a worker gone or restarted
// makes it an execapi.SessionLostError, never a new session elsewhere.
//
// It holds no state that matters beyond the calls in flight: several run
// side by side. It must never send a call's go to two workers, wait
// without bound, hold more of a worker's answers than the call's result
// may weigh (a worker host may be taken over: nothing it sends sizes an
// allocation), or log a request's code or env.
package frontend
