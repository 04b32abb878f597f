package microvm

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/scratchrun/scratchrun/internal/sandbox"
)

// The shifted tree mkfs.erofs reads shows the image's root files as host
// root's, mounted where host users may reach it: it must honour no set-id
// bit (a store image written before they were stripped has them), no device
// node and no exec.
func TestShiftedTreeGrantsNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("idmapped mounts need root")
	}
	const base = 1_000_000_000
	root := t.TempDir()
	su := filepath.Join(root, "su")
	if err := os.WriteFile(su, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{root, su} {
		if err := os.Chown(p, base, base); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(su, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	tree, err := shiftedTree(sandbox.Image{RootFS: root, UIDBase: base})
	if err != nil {
		t.Fatalf("shiftedTree: %v", err)
	}
	dir := t.TempDir()
	err = unix.MoveMount(int(tree.Fd()), "", unix.AT_FDCWD, dir, unix.MOVE_MOUNT_F_EMPTY_PATH)
	tree.Close()
	if err != nil {
		t.Fatalf("move_mount: %v", err)
	}
	t.Cleanup(func() {
		if err := removeBuildMount(dir); err != nil {
			t.Error(err)
		}
	})
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(dir, "su"), &st); err != nil || st.Uid != 0 || st.Mode&unix.S_ISUID == 0 {
		t.Fatalf("su through the shifted tree: uid %d mode %o (%v); want root's, set-uid", st.Uid, st.Mode, err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	for flag, name := range map[int64]string{unix.ST_NOSUID: "nosuid", unix.ST_NODEV: "nodev", unix.ST_NOEXEC: "noexec", unix.ST_RDONLY: "ro"} {
		if fs.Flags&flag == 0 {
			t.Errorf("the shifted tree is mounted without %s", name)
		}
	}
}
