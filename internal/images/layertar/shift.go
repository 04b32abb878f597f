package layertar

import "golang.org/x/sys/unix"

// IDRange is how many ids a sandbox's user namespace maps; ids outside it
// in a tarball become nobody (65534).
const IDRange = 65536

// nobody is the id an out-of-range tar id becomes.
const nobody = 65534

// Shift says how tar ownership maps to disk ownership.
type Shift struct {
	// Chown is false when not running as root: then every file is owned
	// by the caller and ownership in the tar is ignored.
	Chown bool
	// Base is added to every uid and gid from the tar.
	Base uint32
}

// DiskMode is the mode an entry gets on disk. A shifted image is owned by
// ids no host account has, so "other" on the host means every host user:
// a world-writable directory or file in the image (/var/tmp, /run/lock)
// would let any of them plant or change files that every sandbox then sees.
// Inside the sandbox only its root (the image's owner) writes there, which is
// what sandboxes need.
func (s Shift) DiskMode(mode uint32) uint32 {
	if s.Chown {
		return mode &^ unix.S_IWOTH
	}
	return mode
}

// FileMode is the mode a non-directory gets on disk: DiskMode without the
// set-user-ID and set-group-ID bits, whatever the owner. A set-id file in
// the store would hand a host user who can reach it its owner, which is
// the sandboxes' root (their uid on the host) or, unshifted, the engine's
// user; sandboxes need no set-id programs (they run as root inside, and
// the namespaces level mounts the image nosuid anyway). Directories keep
// their set-group-ID bit: it only chooses the group of new files and lets
// no one run anything.
func (s Shift) FileMode(mode uint32) uint32 {
	return s.DiskMode(mode) &^ (unix.S_ISUID | unix.S_ISGID)
}

// MapID returns the on-disk id for id n of the tar.
func (s Shift) MapID(n int) int {
	if n < 0 || n >= IDRange {
		n = nobody
	}
	return int(s.Base) + n
}
