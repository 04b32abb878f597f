package main

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// The sessions settings reach the engine: off by default and for exec;
// on, the list's defaults are the package's; a worker bounds no key's
// sessions (its front ends do).
func TestSessionsSettingsReachTheEngine(t *testing.T) {
	cleanSettings(t)
	for _, cmd := range []settings.Command{settings.Serve, settings.Exec} {
		cfg, err := engineFor(cmd)
		if err != nil || cfg.Sessions.Policy != (execapi.SessionPolicy{}) {
			t.Errorf("%s without --sessions: %+v, %v", cmd, cfg.Sessions.Policy, err)
		}
	}
	want := execapi.DefaultSessionPolicy()
	want.Enabled = true
	cfg, err := engineFor(settings.Serve, "--sessions")
	if err != nil || cfg.Sessions.Policy != want {
		t.Errorf("serve --sessions: %+v, %v; want %+v", cfg.Sessions.Policy, err, want)
	}
	t.Setenv("SCRATCHRUN_SESSIONS", "1")
	t.Setenv("SCRATCHRUN_SESSIONS_IDLE_TTL", "30s")
	t.Setenv("SCRATCHRUN_SESSIONS_MAX", "3")
	cfg, err = engineFor(settings.Worker)
	want.PerKey, want.IdleTTL, want.Max = 0, 30e9, 3
	if err != nil || cfg.Sessions.Policy != want {
		t.Errorf("worker: %+v, %v; want %+v", cfg.Sessions.Policy, err, want)
	}
}
