package execapi

import (
	"fmt"
	"slices"
	"strings"
)

// Outcome is how a run ended, in one word: what usage rows, metrics and
// front ends classify a Result by. It is derived from what the sandbox
// reported (OutcomeOf), never read back from the note's words.
type Outcome string

// The outcomes of a run that produced a Result. A call that produced none
// (cancelled, or failed) has no Outcome: front ends that count such calls
// classify them themselves.
const (
	// OutcomeSuccess is a program that exited 0.
	OutcomeSuccess Outcome = "success"
	// OutcomeNonzeroExit is a program that ended with another status, or
	// was ended by a signal that no limit sent.
	OutcomeNonzeroExit Outcome = "nonzero_exit"
	// OutcomeTimeout is a run the wall-clock limit killed (exit code 124).
	OutcomeTimeout Outcome = "timeout"
	// OutcomeMemoryLimit is a program the kernel killed at the memory limit
	// (exit code 137).
	OutcomeMemoryLimit Outcome = "memory_limit"
	// OutcomeMachineMemory is a program the kernel killed, within its own
	// memory limit, because the sandboxes together had used up the memory
	// the machine gives them (exit code 137): the machine was
	// over-committed, and a retry may succeed.
	OutcomeMachineMemory Outcome = "machine_memory"
)

// OutcomeOf classifies a run by its exit code and facts. A process killed
// at the memory limit is the program's outcome only when the program itself
// died of it: a child killed there, with the program ending 0 or 1, is a
// fact (Facts.MemoryLimitHit) of a success or a nonzero exit.
func OutcomeOf(exitCode int, f Facts) Outcome {
	switch {
	case f.TimedOut:
		return OutcomeTimeout
	case exitCode == 0:
		return OutcomeSuccess
	case f.MemoryLimitHit && exitCode == ExitKilled:
		return OutcomeMemoryLimit
	case f.MachineMemoryHit && exitCode == ExitKilled:
		return OutcomeMachineMemory
	default:
		return OutcomeNonzeroExit
	}
}

// Facts are what a caller must know about a run beyond its exit code and
// output, as data; the Result's note is written from them (Result.Finish).
type Facts struct {
	// TimeoutMS and MemoryMB are the limits the run had.
	TimeoutMS int64 `json:"timeout_ms"`
	MemoryMB  int   `json:"memory_mb"`
	// TimedOut says the wall-clock limit killed everything in the sandbox.
	TimedOut bool `json:"timed_out"`
	// MemoryLimitHit says the kernel killed a process of the run (the
	// program or a child of it) at the memory limit.
	MemoryLimitHit bool `json:"memory_limit_hit"`
	// MachineMemoryHit says the kernel killed a process of the run within
	// its own memory limit, because all sandboxes together had used up the
	// memory the machine gives them (the executor's budget): memory_mb
	// holds as a ceiling, but is only guaranteed while the machine is not
	// over-committed.
	MachineMemoryHit bool `json:"machine_memory_hit"`
	// ProcessLimit caps processes and threads; ProcessLimitHit says it
	// refused a fork or clone, ForkFailures how many (0 when the sandbox
	// cannot count them).
	ProcessLimit    int64 `json:"process_limit"`
	ProcessLimitHit bool  `json:"process_limit_hit"`
	ForkFailures    int64 `json:"fork_failures"`
	// OutputCut lists the output streams cut at their cap.
	OutputCut []OutputCut `json:"output_cut"`
	// FilesNotReturned lists the return_files that did not come back; the
	// sandbox's notes say why.
	FilesNotReturned []string `json:"files_not_returned"`
	// SandboxNotes are sentences the sandbox composed (why a return file is
	// missing, what else went wrong), escaped as EscapeNote does: their
	// words name paths the caller and user code chose.
	SandboxNotes []string `json:"sandbox_notes"`
	// UnenforcedLimits names the limits this host did not apply to the run
	// ("memory", "processes", "cpu"), as Info.UnenforcedLimits does.
	UnenforcedLimits []string `json:"unenforced_limits"`
	// NoSpace is set when the program reported running out of room ("No
	// space left on device"): the engine sees the program's report, not the
	// write that failed, and says how much a sandbox may write.
	NoSpace *NoSpace `json:"no_space,omitempty"`
	// Alias is set when the request named an alias the operator declared:
	// what ran instead.
	Alias *Alias `json:"alias,omitempty"`
}

// NoSpace is how much a sandbox may write where.
type NoSpace struct {
	// TmpMB caps /tmp (and as much /code and /dev/shm); WritableMB the
	// writable layer over the image, where pip and npm -g install.
	TmpMB      int64 `json:"tmp_mb"`
	WritableMB int64 `json:"writable_mb"`
}

// Alias says that the runtime a request named is an alias.
type Alias struct {
	// Requested is the name the request used; Runtime and Version what ran.
	Requested string `json:"requested"`
	Runtime   string `json:"runtime"`
	Version   string `json:"version,omitempty"`
}

// OutputCut says one stream was cut at its cap.
type OutputCut struct {
	// Stream is "stdout" or "stderr".
	Stream string `json:"stream"`
	// LimitBytes is the cap; DroppedBytes what came after it.
	LimitBytes   int   `json:"limit_bytes"`
	DroppedBytes int64 `json:"dropped_bytes"`
}

// Unenforced limits as Facts.UnenforcedLimits and Info.UnenforcedLimits
// name them.
const (
	LimitMemory    = "memory"
	LimitProcesses = "processes"
	LimitCPU       = "cpu"
)

// unenforcedOrder is the order sentences name unenforced limits in, with
// their words.
var unenforcedOrder = []struct{ name, words string }{
	{LimitMemory, "memory"}, {LimitProcesses, "process-count"}, {LimitCPU, "CPU"},
}

// normalize makes empty lists empty rather than null on the wire.
func (f *Facts) normalize() {
	for _, list := range []*[]string{&f.FilesNotReturned, &f.SandboxNotes, &f.UnenforcedLimits} {
		if *list == nil {
			*list = []string{}
		}
	}
	if f.OutputCut == nil {
		f.OutputCut = []OutputCut{}
	}
}

// sentences words the facts, in the order a note has always given them:
// an alias that was followed, the limit that ended the run, the process
// limit, cut output, a program that ran out of room, what the sandbox said,
// and the limits this host does not enforce.
func (f Facts) sentences(exitCode int) []string {
	var out []string
	if a := f.Alias; a != nil {
		version := ""
		if a.Version != "" {
			version = " (version " + a.Version + ")"
		}
		out = append(out, fmt.Sprintf("Runtime %s is an alias the operator set for %s: the code ran with %s%s", a.Requested, a.Runtime, a.Runtime, version))
	}
	switch {
	case f.TimedOut:
		out = append(out, fmt.Sprintf("The program was killed at the %d ms timeout (exit code %d)", f.TimeoutMS, ExitTimeout))
	case f.MemoryLimitHit:
		out = append(out, fmt.Sprintf("The memory limit of %d MB was hit and the kernel killed the program (exit code %d)", f.MemoryMB, exitCode))
	case f.MachineMemoryHit:
		out = append(out, fmt.Sprintf("The machine ran out of the memory it gives sandboxes and the kernel killed the program (exit code %d) "+
			"although it was within its own memory limit of %d MB; this was not the program's fault, and a retry may succeed", exitCode, f.MemoryMB))
	}
	if f.ProcessLimitHit {
		s := fmt.Sprintf("The process limit of %d was hit", f.ProcessLimit)
		if f.ForkFailures > 0 {
			s += fmt.Sprintf(": %d fork/clone calls failed", f.ForkFailures)
		}
		out = append(out, s)
	}
	for _, c := range f.OutputCut {
		out = append(out, fmt.Sprintf("%s was cut at %d bytes; %d more bytes were dropped", c.Stream, c.LimitBytes, c.DroppedBytes))
	}
	if n := f.NoSpace; n != nil {
		out = append(out, fmt.Sprintf("The program reported \"No space left on device\": a sandbox may write %d MiB to /tmp (and as much to /code and to /dev/shm) "+
			"and %d MiB everywhere else (the writable layer over the image, where pip and npm -g install), all within its memory limit",
			n.TmpMB, n.WritableMB))
	}
	out = append(out, f.SandboxNotes...)
	return append(out, UnenforcedNote(f.UnenforcedLimits))
}

// UnenforcedNote is the sentence every result carries while some limits are
// not enforced, so that a caller (a model, often) never reads a run that
// stayed under no memory limit as one that did. Empty when all are enforced.
func UnenforcedNote(unenforced []string) string {
	var words []string
	for _, l := range unenforcedOrder {
		if slices.Contains(unenforced, l.name) {
			words = append(words, l.words)
		}
	}
	if len(words) == 0 {
		return ""
	}
	s := "This host does not enforce the " + joinWords(words) + " limit"
	if len(words) > 1 {
		s += "s"
	}
	if slices.Contains(unenforced, LimitMemory) {
		s += ": memory_mb was not applied and exceeding it does not end the program"
	}
	return s + "."
}

// joinWords joins "a", "a and b", "a, b and c".
func joinWords(words []string) string {
	if len(words) == 1 {
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
