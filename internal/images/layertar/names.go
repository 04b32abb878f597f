package layertar

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// ErrUnsafeEntry is wrapped by extraction errors for tar entries that would
// land outside the target directory: absolute names, names with "..", and
// names whose parent is a symlink. A real rootfs tarball never has them, so
// they fail the extraction instead of being skipped quietly.
var ErrUnsafeEntry = errors.New("unsafe tar entry")

// cleanName turns a tar entry name into a clean path relative to the root
// ("." for the root itself), refusing anything that could point elsewhere.
func cleanName(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty name", ErrUnsafeEntry)
	}
	if strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("%w: absolute name %q", ErrUnsafeEntry, name)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return "", fmt.Errorf("%w: NUL in name", ErrUnsafeEntry)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("%w: %q contains \"..\"", ErrUnsafeEntry, name)
		}
	}
	return path.Clean(name), nil
}
