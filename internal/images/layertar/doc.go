// Package layertar writes hostile tar streams into a directory: a root
// filesystem tarball (an import, an mmdebstrap build's output) or the layers
// of an OCI image, bottom first, with their whiteouts. It is the one place
// where bytes from outside become files in the image store, and it has one
// API: New opens the target directory, Apply writes one tar stream into it
// (call it once per layer), Finish applies the directories' owners, modes
// and times.
//
// Invariants, whatever the stream holds:
//
//   - Nothing is written, changed or removed outside the target directory.
//     Every path is opened beneath a descriptor of the target with openat2
//     (RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS), and the
//     last component is created with an *at call that never follows a
//     symlink. Entry names that could point elsewhere (absolute, "..", NUL,
//     a parent that is a symlink) fail the extraction with ErrUnsafeEntry
//     rather than being skipped in silence: a real tarball never has them.
//   - No link is followed out. A symlink's target is stored as it is (only
//     the sandbox ever resolves it, inside its own root); a hard link's
//     target must be a path of the tree reached without a symlink, and a
//     link to a symlink links the symlink itself.
//   - Whiteouts (Options.Layers) delete only inside the tree, under a parent
//     opened without symlinks, and a symlink is removed, never what it
//     points to.
//   - No file keeps a set-user-ID or set-group-ID bit (Shift.FileMode):
//     the store is readable by every host user and its files belong to the
//     sandboxes' uid. With Shift.Chown, nothing keeps a world-write bit
//     either (Shift.DiskMode).
//   - No device node or fifo is created (the sandbox makes its own /dev),
//     and a hard link to one is skipped with it.
//   - Ownership is the tar's shifted by Shift.Base when Shift.Chown (root);
//     ids outside the range a sandbox maps (IDRange) become nobody. Without
//     Chown every file belongs to the caller, so the package works, and is
//     fuzzed, as an ordinary user.
//
// It knows nothing of images, registries or digests: callers verify what
// they feed it, bound it (Options.Charge) and rename the tree into place
// only when it is complete.
package layertar
