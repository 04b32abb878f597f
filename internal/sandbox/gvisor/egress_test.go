package gvisor

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

// With egress, a gVisor sandbox uses the slot's network namespace: the
// Sentry's network stack sends through the slot's veth, so the same
// nftables policy applies as to a namespaces sandbox: the internet is
// reachable, private and metadata addresses are refused at once.
func TestEgressThroughSlot(t *testing.T) {
	if !networld.Isolate(t) {
		return
	}
	networld.Build(t)
	img, _ := env.Image(t, "python3.13")
	c := testenv.SandboxConfig(img)
	c.Network = networld.EgressSlot(t, testStateDir)
	r := run(t, c, sandbox.Job{Argv: networld.SlotProbe})
	// No IPv6 at all: not even a route to try.
	if want := networld.SlotProbeWant("ENETUNREACH"); r.Stdout != want {
		t.Errorf("stdout %q, want %q (stderr %q)", r.Stdout, want, r.Stderr)
	}
}
