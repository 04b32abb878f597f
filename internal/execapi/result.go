package execapi

import "strings"

// Exit codes with a fixed meaning in a Result.
const (
	// ExitTimeout is reported when the wall-clock limit killed the run.
	ExitTimeout = 124
	// ExitKilled is reported when the run was killed by SIGKILL, as the kernel
	// does when the memory limit is hit (Outcome and Note then say so).
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
	// It is written from Facts (see Finish), for people and models to read:
	// programs read Outcome and Facts instead.
	Note string `json:"note"`
	// Outcome is how the run ended, in one word. It extends the hosted
	// contract (like files_base64); a server older than it leaves it empty.
	Outcome Outcome `json:"outcome"`
	// Facts are what Note says, as data. An extension like Outcome.
	Facts Facts `json:"facts"`
	// Worker is the id of the cluster's worker that ran the call, set by
	// the front end that placed it ("" on one machine); WorkerOf reads
	// it. It is the only field not on the wire: the front end names the
	// worker from whom it heard, never from what a result says, and a
	// caller is not told how the cluster is laid out.
	Worker string `json:"-"`
}

// Finish derives Outcome and Note from ExitCode, StatePurged and Facts. An
// Executor that builds a Result calls it once, when everything else is in
// place; it is the one place where a run's facts become words.
func (r *Result) Finish() { r.finish(true) }

// finish is Finish; teardown says whether the call's sandbox was torn
// down, so that StatePurged false is news (a call in a session that goes
// on keeps its sandbox by design).
func (r *Result) finish(teardown bool) {
	if r.Files == nil {
		r.Files = map[string]string{}
	}
	r.Facts.normalize()
	r.Outcome = OutcomeOf(r.ExitCode, r.Facts)
	r.Note = ""
	for _, sentence := range r.Facts.sentences(r.ExitCode) {
		r.AddNote(sentence)
	}
	if teardown && !r.StatePurged {
		r.AddNote("Teardown of the sandbox could not be verified")
	}
}

// AddNote appends one sentence to r.Note. Front ends use it to add what
// they did to a result (the MCP tool says what it cut to fit a client).
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
