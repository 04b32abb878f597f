package microvm

import (
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
)

// uidEngine is as much of a backend as QEMU's uid takes: its own open of
// the host's lock file at path, no memory shared with any other.
func uidEngine(t *testing.T, path string) *Backend {
	t.Helper()
	u, err := openVMMUIDs(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.close() })
	return &Backend{uids: u, kvmGroup: -1}
}

// vmmUID is the uid the next VM of b runs QEMU as, with its sandbox.
func vmmUID(t *testing.T, b *Backend) (uint32, *vmSandbox) {
	t.Helper()
	s := &vmSandbox{backend: b}
	c, err := s.vmmCredential()
	if err != nil {
		t.Fatal(err)
	}
	return c.Uid, s
}

// Two engines (two servers, a server and a one-shot exec) never run VMs
// as the same uid, and a uid comes back only when its VM is gone.
func TestVMMUIDsAreDistinctAcrossEngines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "uids.lock")
	a, b := uidEngine(t, path), uidEngine(t, path)
	seen := map[uint32]string{}
	var first *vmSandbox
	for i := range 3 {
		for name, e := range map[string]*Backend{"a": a, "b": b} {
			uid, s := vmmUID(t, e)
			if other, dup := seen[uid]; dup {
				t.Fatalf("engine %s got uid %d, which engine %s's live VM runs as", name, uid, other)
			}
			seen[uid] = name
			if i == 0 && name == "a" {
				first = s
			}
		}
	}
	// Destroying a sandbox whose QEMU is gone gives its uid back, to
	// whichever engine asks next.
	first.backend.uids.release(first.vmmUID)
	if uid, _ := vmmUID(t, b); uid != first.vmmUID {
		t.Errorf("after release engine b got %d, want the freed %d", uid, first.vmmUID)
	}
	// An engine that ends (or crashes) frees its uids with its locks.
	c := uidEngine(t, path)
	a.uids.close()
	for range len(seen) {
		uid, _ := vmmUID(t, c)
		if seen[uid] == "b" {
			t.Fatalf("uid %d of a live VM of engine b was handed out again", uid)
		}
	}
}

// A uid some process still runs as (a VM whose engine took no lock, or
// one not yet gone) is passed over even when no engine holds it.
func TestVMMUIDsSkipUIDsInUse(t *testing.T) {
	if testing.Short() { // the fast tier: see docs/design.md, "Test tiers"
		t.Skip("skipped under -short (the fast tier): starts processes as other uids, as root")
	}
	cmd := exec.Command("/bin/sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL,
		Credential: &syscall.Credential{Uid: vmmUIDBase, Gid: vmmUIDBase}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	e := uidEngine(t, filepath.Join(t.TempDir(), "uids.lock"))
	if uid, _ := vmmUID(t, e); uid == vmmUIDBase {
		t.Errorf("uid %d handed out while process %d runs as it", uid, cmd.Process.Pid)
	}
}
