package sandbox

// Optional interfaces (Emulation, MemoryBudget, CPUMeter, a sandbox's
// Diagnostics) are found by what a value implements, so a wrapper (a
// backend that counts what it creates, a sandbox that records its runs)
// would hide those of what it wraps unless it forwarded each one, and a
// wrapper written before an interface existed hides it silently. A
// wrapper instead says what it wraps, as errors do: a Backend with
// Unwrap() Backend, a Sandbox with Unwrap() Sandbox; and whoever looks an
// optional interface up asks BackendAs or SandboxAs, which walk down
// through the wrappers, as errors.As does.

// BackendAs finds the first of b and the backends it wraps (Unwrap()
// Backend, followed down) that implements T.
func BackendAs[T any](b Backend) (T, bool) { return as[T](b) }

// SandboxAs finds the first of s and the sandboxes it wraps (Unwrap()
// Sandbox, followed down) that implements T.
func SandboxAs[T any](s Sandbox) (T, bool) { return as[T](s) }

// maxWraps bounds the walk: no chain of wrappers is this deep, and a
// wrapper that wraps itself ends the walk rather than the process.
const maxWraps = 100

func as[T, W any](v W) (T, bool) {
	for range maxWraps {
		if t, ok := any(v).(T); ok {
			return t, true
		}
		u, ok := any(v).(interface{ Unwrap() W })
		if !ok {
			break
		}
		v = u.Unwrap()
	}
	var zero T
	return zero, false
}
