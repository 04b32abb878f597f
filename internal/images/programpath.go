package images

import (
	"fmt"
	"path"
	"strings"
)

// DefaultImagePath is the PATH a program name is looked up in when the
// image's environment sets none: Debian's (and the engine's) default.
const DefaultImagePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// isProgramName reports whether program is a bare name, to be looked up
// in the image's PATH.
func isProgramName(program string) bool {
	return program != "" && !strings.Contains(program, "/")
}

// resolveProgram turns the program of a runtime's command into the
// absolute path it runs as: an absolute path must name an executable file
// of the image; a bare name is looked up in pathVar (the runtime's PATH,
// DefaultImagePath when empty), directory by directory, inside the image:
// symlinks resolve within rootfs (checkProgram), never on the host. The
// path found is kept as the PATH gives it, not its symlinks' target, as a
// shell would run it (python3 -> python3.13 stays /usr/bin/python3).
func resolveProgram(rootfs, program, pathVar string) (string, error) {
	if strings.HasPrefix(program, "/") {
		return program, checkProgram(rootfs, program)
	}
	if !isProgramName(program) {
		return "", fmt.Errorf("command: program %q must be an absolute path or a name to look up in the image's PATH", program)
	}
	if pathVar == "" {
		pathVar = DefaultImagePath
	}
	for _, dir := range strings.Split(pathVar, ":") {
		// A relative entry would search the working directory: the
		// code's own /tmp, not the image.
		if !strings.HasPrefix(dir, "/") {
			continue
		}
		candidate := path.Join(dir, program)
		if checkProgram(rootfs, candidate) == nil {
			return candidate, nil
		}
	}
	return "", fmt.Errorf("command: program %q is not in the image's PATH (%s)", program, pathVar)
}
