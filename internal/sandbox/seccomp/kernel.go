//go:build linux && amd64

package seccomp

import (
	"fmt"

	dockerprofile "github.com/moby/profiles/seccomp"
	"golang.org/x/sys/unix"
)

// runningKernel returns the "<kernel>.<major>" version of the running kernel,
// which is what the profile's minKernel conditions compare against.
func runningKernel() (dockerprofile.KernelVersion, error) {
	var uts unix.Utsname
	if err := unix.Uname(&uts); err != nil {
		return dockerprofile.KernelVersion{}, fmt.Errorf("uname: %w", err)
	}
	return parseKernelRelease(unix.ByteSliceToString(uts.Release[:]))
}

// parseKernelRelease parses a uname release such as "6.18.44-fc-v782" the way
// moby does: only kernel and major revision count, minor revisions and distro
// suffixes are ignored ("3.12.25-gentoo" and "3.12-1-amd64" are both 3.12).
// Matching moby exactly keeps minKernel rules in or out just as Docker would.
func parseKernelRelease(release string) (dockerprofile.KernelVersion, error) {
	var v dockerprofile.KernelVersion
	if _, err := fmt.Sscanf(release, "%d.%d", &v.Kernel, &v.Major); err != nil {
		return dockerprofile.KernelVersion{}, fmt.Errorf("parse kernel release %q: %w", release, err)
	}
	return v, nil
}

// kernelAtLeast reports whether have >= want, comparing kernel then major
// revision (moby's kernelGreaterEqualThan).
func kernelAtLeast(have, want dockerprofile.KernelVersion) bool {
	if have.Kernel != want.Kernel {
		return have.Kernel > want.Kernel
	}
	return have.Major >= want.Major
}
