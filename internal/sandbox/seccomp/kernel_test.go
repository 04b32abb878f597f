//go:build linux && amd64

package seccomp

import (
	"testing"

	dockerprofile "github.com/moby/profiles/seccomp"
)

func TestParseKernelRelease(t *testing.T) {
	for release, want := range map[string]dockerprofile.KernelVersion{
		"6.18.44-fc-v782": {Kernel: 6, Major: 18},
		"3.12.25-gentoo":  {Kernel: 3, Major: 12},
		"3.12-1-amd64":    {Kernel: 3, Major: 12},
		"4.8":             {Kernel: 4, Major: 8},
	} {
		got, err := parseKernelRelease(release)
		if err != nil || got != want {
			t.Errorf("parseKernelRelease(%q) = %v, %v; want %v", release, got, err, want)
		}
	}
	for _, bad := range []string{"", "linux", "6"} {
		if _, err := parseKernelRelease(bad); err == nil {
			t.Errorf("parseKernelRelease(%q) succeeded", bad)
		}
	}
	if _, err := runningKernel(); err != nil {
		t.Errorf("runningKernel: %v", err)
	}
}

func TestKernelAtLeast(t *testing.T) {
	v := func(k, m uint64) dockerprofile.KernelVersion { return dockerprofile.KernelVersion{Kernel: k, Major: m} }
	cases := []struct {
		have, want dockerprofile.KernelVersion
		ok         bool
	}{
		{v(6, 18), v(4, 8), true},
		{v(4, 8), v(4, 8), true},
		{v(4, 7), v(4, 8), false},
		{v(3, 20), v(4, 8), false},
		{v(5, 0), v(4, 20), true},
	}
	for _, c := range cases {
		if got := kernelAtLeast(c.have, c.want); got != c.ok {
			t.Errorf("kernelAtLeast(%v, %v) = %v", c.have, c.want, got)
		}
	}
}
