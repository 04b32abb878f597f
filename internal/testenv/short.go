package testenv

import (
	"flag"
	"testing"
)

// SkipIfShort skips t in the fast test tier (go test -short, run by an
// ordinary user with no images and no services: see docs/design.md, "Test
// tiers"), saying why: needs is what t needs that the tier lacks ("runs
// real sandboxes", "needs PostgreSQL"). The full tier (root, -tags
// hostile, without -short) runs it.
func SkipIfShort(t testing.TB, needs string) {
	t.Helper()
	if testing.Short() {
		t.Skipf("skipped under -short (the fast tier): %s", needs)
	}
}

// short is testing.Short for TestMain, where flags may not be parsed yet.
func short() bool {
	if !flag.Parsed() {
		flag.Parse()
	}
	return testing.Short()
}
