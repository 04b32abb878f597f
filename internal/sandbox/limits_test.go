package sandbox

import (
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
