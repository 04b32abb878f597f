package execapi

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// A run's outcome comes from its exit code and facts alone: the program's
// own 124 or 137 is a nonzero exit, a child killed at the memory limit
// leaves the program's own status standing.
func TestOutcomeOf(t *testing.T) {
	cases := []struct {
		exit  int
		facts Facts
		want  Outcome
	}{
		{0, Facts{}, OutcomeSuccess},
		{1, Facts{}, OutcomeNonzeroExit},
		{ExitTimeout, Facts{}, OutcomeNonzeroExit},
		{ExitTimeout, Facts{TimedOut: true}, OutcomeTimeout},
		{ExitTimeout, Facts{TimedOut: true, MemoryLimitHit: true}, OutcomeTimeout},
		{ExitKilled, Facts{}, OutcomeNonzeroExit},
		{ExitKilled, Facts{MemoryLimitHit: true}, OutcomeMemoryLimit},
		{ExitKilled, Facts{MachineMemoryHit: true}, OutcomeMachineMemory},
		{0, Facts{MachineMemoryHit: true}, OutcomeSuccess},
		{1, Facts{MachineMemoryHit: true}, OutcomeNonzeroExit},
		{0, Facts{MemoryLimitHit: true}, OutcomeSuccess},
		{1, Facts{MemoryLimitHit: true}, OutcomeNonzeroExit},
		{0, Facts{ProcessLimitHit: true}, OutcomeSuccess},
	}
	for _, c := range cases {
		if got := OutcomeOf(c.exit, c.facts); got != c.want {
			t.Errorf("exit %d, %+v: %q, want %q", c.exit, c.facts, got, c.want)
		}
	}
}

// Finish writes the note from the facts, in the order notes have always
// come, one sentence each, and the outcome beside it; it can be called
// again without doubling anything.
func TestFinishWritesTheNoteFromTheFacts(t *testing.T) {
	r := Result{ExitCode: ExitTimeout, StatePurged: false, Facts: Facts{
		TimeoutMS: 1000, MemoryMB: 64, TimedOut: true, MemoryLimitHit: true,
		ProcessLimit: 256, ProcessLimitHit: true, ForkFailures: 7,
		OutputCut:        []OutputCut{{Stream: "stdout", LimitBytes: 10, DroppedBytes: 5}, {Stream: "stderr", LimitBytes: 10, DroppedBytes: 1}},
		FilesNotReturned: []string{"/tmp/a"},
		SandboxNotes:     []string{"Return file /tmp/a was not returned: it does not exist."},
		UnenforcedLimits: []string{LimitCPU},
	}}
	r.Finish()
	r.Finish()
	want := "The program was killed at the 1000 ms timeout (exit code 124)." +
		" The process limit of 256 was hit: 7 fork/clone calls failed." +
		" stdout was cut at 10 bytes; 5 more bytes were dropped." +
		" stderr was cut at 10 bytes; 1 more bytes were dropped." +
		" Return file /tmp/a was not returned: it does not exist." +
		" This host does not enforce the CPU limit." +
		" Teardown of the sandbox could not be verified."
	if r.Note != want || r.Outcome != OutcomeTimeout {
		t.Errorf("note %q outcome %q\nwant %q", r.Note, r.Outcome, want)
	}
	oom := Result{ExitCode: ExitKilled, StatePurged: true, Facts: Facts{MemoryMB: 64, MemoryLimitHit: true}}
	oom.Finish()
	if oom.Note != "The memory limit of 64 MB was hit and the kernel killed the program (exit code 137)." || oom.Outcome != OutcomeMemoryLimit {
		t.Errorf("memory limit: %q %q", oom.Note, oom.Outcome)
	}
	machine := Result{ExitCode: ExitKilled, StatePurged: true, Facts: Facts{MemoryMB: 256, MachineMemoryHit: true}}
	machine.Finish()
	if machine.Outcome != OutcomeMachineMemory || !strings.HasPrefix(machine.Note, "The machine ran out of the memory it gives sandboxes") ||
		!strings.Contains(machine.Note, "own memory limit of 256 MB") || strings.Contains(machine.Note, "limit of 256 MB was hit") {
		t.Errorf("the machine's memory: %q %q", machine.Note, machine.Outcome)
	}
	quiet := Result{StatePurged: true}
	quiet.Finish()
	if quiet.Note != "" || quiet.Outcome != OutcomeSuccess {
		t.Errorf("nothing to say: %q %q", quiet.Note, quiet.Outcome)
	}
	// Empty lists are empty on the wire, never null.
	data, _ := json.Marshal(quiet)
	if strings.Contains(string(data), "null") {
		t.Errorf("result JSON holds null: %s", data)
	}
}

// Outcome and facts survive JSON, so that a front end forwarding a result
// (the HTTP client, a cluster's) passes on what the engine said.
func TestResultSurvivesJSON(t *testing.T) {
	r := Result{ExitCode: 1, Stdout: "x", Files: map[string]string{}, Facts: Facts{
		TimeoutMS: 1000, MemoryMB: 64, ProcessLimit: 9, ProcessLimitHit: true, ForkFailures: 2,
		OutputCut: []OutputCut{{Stream: "stderr", LimitBytes: 3, DroppedBytes: 4}}, FilesNotReturned: []string{"/tmp/x"},
		SandboxNotes: []string{"n."}, UnenforcedLimits: []string{LimitMemory},
	}}
	r.Finish()
	data, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(data, &back); err != nil || !reflect.DeepEqual(back, r) {
		t.Errorf("round trip: %+v (%v)\nwant %+v", back, err, r)
	}
}

// Every result's note names the limits that were not applied; the memory
// one says what that means for memory_mb. (The wording the sandbox package
// had, now written where every other sentence of a note is.)
func TestUnenforcedNote(t *testing.T) {
	got := UnenforcedNote([]string{LimitProcesses, LimitMemory, LimitCPU})
	want := "This host does not enforce the memory, process-count and CPU limits: memory_mb was not applied and exceeding it does not end the program."
	if got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if got := UnenforcedNote([]string{LimitCPU}); got != "This host does not enforce the CPU limit." {
		t.Errorf("CPU only: %q", got)
	}
	if got := UnenforcedNote(nil); got != "" {
		t.Errorf("all enforced: %q", got)
	}
	for _, l := range []string{LimitMemory, LimitProcesses, LimitCPU} {
		if !strings.HasSuffix(UnenforcedNote([]string{l}), ".") {
			t.Errorf("%s: not a sentence", l)
		}
	}
}
