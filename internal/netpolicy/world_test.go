package netpolicy_test

import (
	"flag"
	"os"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv/networld"
)

// The egress tests run in a network namespace of their own with no route off
// the machine, where each builds the small world of package networld: an
// internet host, a resolver, a private host and a metadata service behind
// this namespace's uplink. Every packet of these tests stays in namespaces
// the test made.
func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		// The fast tier: every test here skips (they need root), so the
		// binary is not started again in a namespace an ordinary user
		// cannot make.
		os.Exit(m.Run())
	}
	if !networld.Isolated() {
		os.Exit(networld.ReexecIsolated())
	}
	if os.Getenv(holderEnv) != "" {
		holdEgress()
	}
	os.Exit(m.Run())
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
