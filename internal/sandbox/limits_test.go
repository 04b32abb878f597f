package sandbox

import (
	"strings"
	"testing"
)

// The start-up warning both backends print is whole: it names what is not
// enforced, why, what still is, and ends as a sentence (it used to stop at
// "... file-system size caps are").
func TestUnenforcedWarningIsWhole(t *testing.T) {
	cases := []struct {
		unenforced []Limit
		why        string
		want       string
	}{
		{HostLimits, "no writable cgroup",
			"memory, process-count and CPU limits are NOT enforced (no writable cgroup); timeouts, output caps and file-system size caps still are."},
		{[]Limit{LimitCPU, LimitMemory}, "no cgroup",
			"memory and CPU limits are NOT enforced (no cgroup); process-count limits, timeouts, output caps and file-system size caps still are."},
		{[]Limit{LimitCPU, LimitCPU}, "",
			"CPU limits are NOT enforced; memory limits, process-count limits, timeouts, output caps and file-system size caps still are."},
		{nil, "anything", ""},
	}
	for _, c := range cases {
		if got := UnenforcedWarning(c.unenforced, c.why); got != c.want {
			t.Errorf("UnenforcedWarning(%v, %q) =\n  %q\nwant\n  %q", c.unenforced, c.why, got, c.want)
		}
	}
}

// Every result's note names the limits that were not applied; the memory
// one says what that means for memory_mb.
func TestUnenforcedNote(t *testing.T) {
	got := UnenforcedNote([]Limit{LimitProcesses, LimitMemory, LimitCPU})
	want := "This host does not enforce the memory, process-count and CPU limits: memory_mb was not applied and exceeding it does not end the program."
	if got != want {
		t.Errorf("note %q, want %q", got, want)
	}
	if got := UnenforcedNote([]Limit{LimitCPU}); got != "This host does not enforce the CPU limit." {
		t.Errorf("CPU only: %q", got)
	}
	if got := UnenforcedNote(nil); got != "" {
		t.Errorf("all enforced: %q", got)
	}
	for _, l := range HostLimits {
		if !strings.HasSuffix(UnenforcedNote([]Limit{l}), ".") {
			t.Errorf("%s: not a sentence", l)
		}
	}
}
