package microvm

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

// With egress, a microVM's network interface is a tap bridged into the
// slot's namespace, and the guest takes the slot's address: the host's
// nftables policy applies as to a namespaces sandbox: the internet is
// reachable, private and metadata addresses are refused at once. The guest
// kernel has no IPv6 at all.
func TestEgressThroughSlot(t *testing.T) {
	if !networld.Isolate(t) {
		return
	}
	networld.Build(t)
	img, _ := env.Image(t, "python3.13")
	c := testenv.SandboxConfig(img)
	c.Network = networld.EgressSlot(t, level.StateDir)
	r := run(t, c, sandbox.Job{Argv: networld.SlotProbe})
	// No IPv6 at all: not even the address family.
	if want := networld.SlotProbeWant("EAFNOSUPPORT"); r.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
	}
}
