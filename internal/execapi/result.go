package execapi

import "strings"

// Exit codes with a fixed meaning in a Result.
const (
	// ExitTimeout is reported when the wall-clock limit killed the run.
	ExitTimeout = 124
	// ExitKilled is reported when the run was killed by SIGKILL, as the kernel
	// does when the memory limit is hit (Note then says so).
	ExitKilled = 137
)

// Result is what one run produced. Every field is always present on the wire so
// that clients can rely on the shape.
type Result struct {
	// ExitCode is the program's exit status, 128+N when killed by signal N,
	// ExitTimeout (124) on timeout.
	ExitCode int `json:"exit_code"`
	// Stdout and Stderr are the program's output, each capped (see Note).
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
	// ExecutionMS is the wall-clock time the program ran inside the sandbox.
	ExecutionMS int64 `json:"execution_ms"`
	// StatePurged is true only when teardown verifiably finished: no process,
	// mount, cgroup or namespace of the sandbox is left.
	StatePurged bool `json:"state_purged"`
	// Files maps each returned path to its content, base64-encoded.
	Files map[string]string `json:"files"`
	// Note holds one sentence per thing the caller must know (truncated output,
	// a missing return file, a limit that was hit); empty when there is none.
	Note string `json:"note"`
}

// AddNote appends one sentence to r.Note.
func (r *Result) AddNote(sentence string) {
	sentence = strings.TrimSpace(sentence)
	if sentence == "" {
		return
	}
	if !strings.HasSuffix(sentence, ".") {
		sentence += "."
	}
	if r.Note == "" {
		r.Note = sentence
		return
	}
	r.Note += " " + sentence
}
