package main

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// The per-sandbox connection limits come from the environment, and a bad
// value is refused naming its variable.
func TestEgressConnectionLimitSettings(t *testing.T) {
	t.Setenv("SCRATCHRUN_ALLOW_EGRESS", "1")
	t.Setenv("SCRATCHRUN_DNS", "192.0.2.53")
	t.Setenv("SCRATCHRUN_EGRESS_MAX_CONNECTIONS", "64")
	t.Setenv("SCRATCHRUN_EGRESS_CONNECTIONS_PER_SECOND", "7")
	nc, err := networkFor(settings.Exec)
	if err != nil || nc.MaxConnections != 64 || nc.NewConnectionsPerSecond != 7 {
		t.Fatalf("settings: %+v, %v; want 64 connections, 7 a second", nc, err)
	}
	for _, bad := range []string{"0", "-3", "many"} {
		t.Setenv("SCRATCHRUN_EGRESS_CONNECTIONS_PER_SECOND", bad)
		if _, err := networkFor(settings.Exec); err == nil || !strings.Contains(err.Error(), "SCRATCHRUN_EGRESS_CONNECTIONS_PER_SECOND") {
			t.Errorf("%q: %v, want an error naming the variable", bad, err)
		}
	}
}
