package namespaces

import "testing"

// Zygotes' owner blocks start where the engine's owner uids do (by pid):
// two engines on one host rarely give their zygotes the same block. Each
// block is whole, within the range, and never handed out twice while held.
func TestOwnerBlocksStartPerEngine(t *testing.T) {
	const n = 1024
	a, b := &owners{next: 5 * n, inUse: map[uint32]bool{}}, &owners{next: 40*n + 17, inUse: map[uint32]bool{}}
	ba, err := a.takeBlock(n)
	if err != nil {
		t.Fatal(err)
	}
	bb, err := b.takeBlock(n)
	if err != nil {
		t.Fatal(err)
	}
	if ba != ownerUIDBase+5*n || bb != ownerUIDBase+40*n {
		t.Errorf("blocks at %d and %d, want %d and %d", ba-ownerUIDBase, bb-ownerUIDBase, 5*n, 40*n)
	}
	seen := map[uint32]bool{ba: true}
	for range ownerUIDCount/n - 1 {
		base, err := a.takeBlock(n)
		if err != nil {
			t.Fatal(err)
		}
		if seen[base] || (base-ownerUIDBase)%n != 0 || base+n > ownerUIDBase+ownerUIDCount {
			t.Fatalf("block at %d: taken twice, unaligned or out of range", base-ownerUIDBase)
		}
		seen[base] = true
	}
	if _, err := a.takeBlock(n); err == nil {
		t.Error("a block was handed out with every uid in use")
	}
	a.releaseBlock(ba, n)
	if again, err := a.takeBlock(n); err != nil || again != ba {
		t.Errorf("after releasing %d: %d, %v", ba-ownerUIDBase, again-ownerUIDBase, err)
	}
}
