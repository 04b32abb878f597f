package sandbox

import (
	"slices"
	"strings"
)

// Limit names a resource limit that a backend enforces through the host (a
// cgroup, today) and that some hosts cannot give it. The values are what
// GET /v1/runtimes reports in "unenforced_limits".
type Limit string

// The limits a backend may be unable to enforce.
const (
	// LimitMemory is the request's memory_mb (swap included).
	LimitMemory Limit = "memory"
	// LimitProcesses caps processes and threads (fork bombs).
	LimitProcesses Limit = "processes"
	// LimitCPU caps CPU time.
	LimitCPU Limit = "cpu"
)

// HostLimits are every Limit, in the order messages name them.
var HostLimits = []Limit{LimitMemory, LimitProcesses, LimitCPU}

// limitWords is how messages name each limit.
var limitWords = map[Limit]string{LimitMemory: "memory", LimitProcesses: "process-count", LimitCPU: "CPU"}

// alwaysEnforced are enforced by every backend on every host, without the
// host's help: they are named as what still holds.
var alwaysEnforced = []string{"timeouts", "output caps", "file-system size caps"}

// SortLimits returns limits without duplicates, in HostLimits order.
func SortLimits(limits []Limit) []Limit {
	var out []Limit
	for _, l := range HostLimits {
		if slices.Contains(limits, l) {
			out = append(out, l)
		}
	}
	return out
}

// UnenforcedWarning is the one wording both backends use to say, once at
// start, which limits this host does not let them enforce, why, and what
// still holds. It is empty when every limit is enforced.
func UnenforcedWarning(unenforced []Limit, why string) string {
	unenforced = SortLimits(unenforced)
	if len(unenforced) == 0 {
		return ""
	}
	var names, still []string
	for _, l := range HostLimits {
		if slices.Contains(unenforced, l) {
			names = append(names, limitWords[l])
		} else {
			still = append(still, limitWords[l]+" limits")
		}
	}
	still = append(still, alwaysEnforced...)
	s := joinWords(names) + " limits are NOT enforced"
	if why != "" {
		s += " (" + why + ")"
	}
	return s + "; " + joinWords(still) + " still are."
}

// joinWords joins "a", "a and b", "a, b and c".
func joinWords(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}

// UnenforcedReason is implemented by backends that know why the host does
// not let them enforce their UnenforcedLimits (no cgroup hierarchy, a
// controller missing): the reason is a fact of its own, so that a caller
// that words the refusal need not search the Limitations sentences.
type UnenforcedReason interface {
	// UnenforcedWhy says why, in a few words ("" when every limit is
	// enforced or the backend cannot tell).
	UnenforcedWhy() string
}

// UnenforcedWhy is b's UnenforcedReason, "" when it has none.
func UnenforcedWhy(b Backend) string {
	if r, ok := b.(UnenforcedReason); ok {
		return r.UnenforcedWhy()
	}
	return ""
}
