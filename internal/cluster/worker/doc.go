// Package worker serves a cluster's calls with the local engine: it is to
// NATS what package httpapi is to HTTP, an adapter over an
// execapi.CheckedExecutor. It publishes the worker's registration (what
// it runs, what its admission would admit now) to the registry every
// heartbeat, answers the calls addressed to it, validates each with the
// engine's own policy (never the front end's view), lets the engine's
// admission refuse at once, streams the run's events and liveness beats
// to the caller, kills the sandbox when the caller cancels or falls
// silent, and on Shutdown deregisters, refuses new calls, finishes those
// in flight and delivers their results. With Config.Sessions it serves
// the engine's sessions too (sessions.go), rechecking each operation
// against its own policies, and ends them as it stops (drain.go), naming
// them in its last registration.
//
// It must never start a call without the front end's go, start one twice,
// keep a call's payload anywhere but in memory, hold offers not yet
// started beyond room tied to its capacity, publish while holding its
// lock (a slow link must not stop the other calls), or know about
// sandboxes: the engine runs them.
package worker
