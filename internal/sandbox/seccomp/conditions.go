//go:build linux && amd64

package seccomp

import (
	"math/bits"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// maxArgs is the number of syscall arguments seccomp_data exposes.
const maxArgs = 6

// argMatch is the argument part of a rule in go-seccomp-bpf's terms: it
// matches when always is set or when any of sets matches; a set matches when
// all of its conditions hold. The zero value never matches.
type argMatch struct {
	always bool
	sets   []seccompbpf.ArgumentConditions
}

// matchAlways matches any arguments.
var matchAlways = argMatch{always: true}

// or returns the union of two matches.
func (m argMatch) or(o argMatch) argMatch {
	if m.always || o.always {
		return matchAlways
	}
	return argMatch{sets: append(append([]seccompbpf.ArgumentConditions(nil), m.sets...), o.sets...)}
}

// argOutcome says how exactly one OCI argument comparison translated.
type argOutcome int

const (
	argExact           argOutcome = iota // the conditions express it exactly (none: always true)
	argNever                             // it can never hold
	argUnrepresentable                   // go-seccomp-bpf cannot express it
)

// translateArgs converts a rule's argument comparisons.
//
// libseccomp ANDs the comparisons of one rule, but runc adds a rule whose
// comparisons share an argument index as separate rules, i.e. ORs them
// (opencontainers/runc#2735). To never loosen the profile whichever reading
// applies, allow rules (permissive) use AND, the narrower reading, and deny
// rules with a repeated index use OR, the wider one.
//
// A comparison go-seccomp-bpf cannot express (unknown operator, argument
// index beyond 5) makes an allow rule never match and is dropped from a deny
// rule's conjunction, which widens the deny. Either way the result is at
// least as strict as the profile. Docker's current default profile contains
// no such comparison; the fallback exists so a future profile fails safe.
func translateArgs(args []specs.LinuxSeccompArg, permissive bool) argMatch {
	if len(args) == 0 {
		return matchAlways
	}
	if !permissive && repeatsIndex(args) {
		var m argMatch
		for _, a := range args {
			m = m.or(translateArgs([]specs.LinuxSeccompArg{a}, false))
		}
		return m
	}
	var set seccompbpf.ArgumentConditions
	for _, a := range args {
		conds, outcome := translateArg(a)
		switch outcome {
		case argNever:
			return argMatch{}
		case argUnrepresentable:
			if permissive {
				return argMatch{}
			}
			continue
		}
		set = append(set, conds...)
	}
	if len(set) == 0 {
		return matchAlways
	}
	return argMatch{sets: []seccompbpf.ArgumentConditions{set}}
}

// repeatsIndex reports whether two comparisons test the same argument.
func repeatsIndex(args []specs.LinuxSeccompArg) bool {
	seen := map[uint]bool{}
	for _, a := range args {
		if seen[a.Index] {
			return true
		}
		seen[a.Index] = true
	}
	return false
}

// translateArg converts one OCI comparison into go-seccomp-bpf conditions,
// all of which must hold. All comparisons are on the full 64-bit argument, as
// libseccomp does on 64-bit architectures.
//
// SCMP_CMP_MASKED_EQ ((arg & Value) == ValueTwo) has no direct counterpart;
// go-seccomp-bpf offers BitsSet (any bit of the mask set) and BitsNotSet (no
// bit of the mask set). It is expressed exactly as "no bit of Value &^
// ValueTwo set" AND "bit b set" for every bit b of ValueTwo. When ValueTwo has
// a bit outside Value the comparison can never hold, for libseccomp too.
func translateArg(a specs.LinuxSeccompArg) ([]seccompbpf.Condition, argOutcome) {
	if a.Index >= maxArgs {
		return nil, argUnrepresentable
	}
	idx := uint32(a.Index)
	one := func(op seccompbpf.Operation, v uint64) ([]seccompbpf.Condition, argOutcome) {
		return []seccompbpf.Condition{{Argument: idx, Operation: op, Value: v}}, argExact
	}
	switch a.Op {
	case specs.OpEqualTo:
		return one(seccompbpf.Equal, a.Value)
	case specs.OpNotEqual:
		return one(seccompbpf.NotEqual, a.Value)
	case specs.OpGreaterThan:
		return one(seccompbpf.GreaterThan, a.Value)
	case specs.OpGreaterEqual:
		return one(seccompbpf.GreaterOrEqual, a.Value)
	case specs.OpLessThan:
		return one(seccompbpf.LessThan, a.Value)
	case specs.OpLessEqual:
		return one(seccompbpf.LessOrEqual, a.Value)
	case specs.OpMaskedEqual:
		mask, want := a.Value, a.ValueTwo
		if want&^mask != 0 {
			return nil, argNever
		}
		var conds []seccompbpf.Condition
		if clear := mask &^ want; clear != 0 {
			conds = append(conds, seccompbpf.Condition{Argument: idx, Operation: seccompbpf.BitsNotSet, Value: clear})
		}
		for rest := want; rest != 0; rest &= rest - 1 {
			bit := uint64(1) << bits.TrailingZeros64(rest)
			conds = append(conds, seccompbpf.Condition{Argument: idx, Operation: seccompbpf.BitsSet, Value: bit})
		}
		return conds, argExact
	default:
		return nil, argUnrepresentable
	}
}
