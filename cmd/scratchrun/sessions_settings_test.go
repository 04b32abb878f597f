package main

import (
	"strconv"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// The sessions settings' literal defaults are execapi's documented ones
// (DefaultSessionPolicy), as TestSettingsDefaultsAreThePackages checks the
// others: the settings package is a leaf and cannot ask.
func TestSessionSettingsDefaultsAreTheContracts(t *testing.T) {
	sp := execapi.DefaultSessionPolicy()
	if settings.Sessions.Default != "0" || sp.Enabled {
		t.Errorf("sessions on by default: setting %q, policy %v", settings.Sessions.Default, sp.Enabled)
	}
	for s, want := range map[*settings.Setting]time.Duration{
		settings.SessionsIdleTTL: sp.IdleTTL, settings.SessionsMaxIdleTTL: sp.MaxIdleTTL, settings.SessionsMaxLifetime: sp.MaxLifetime,
	} {
		if d, err := time.ParseDuration(s.Default); err != nil || d != want {
			t.Errorf("%s: the list says %q, execapi %s", s.Name, s.Default, want)
		}
		if time.Duration(s.Min) != execapi.MinSessionTTL {
			t.Errorf("%s: at least %s, execapi's minimum %s", s.Name, time.Duration(s.Min), execapi.MinSessionTTL)
		}
	}
	for s, want := range map[*settings.Setting]int{
		settings.SessionsPerKey: sp.PerKey, settings.SessionsMax: sp.Max, settings.SessionsMaxMemory: sp.MaxMemoryMB,
	} {
		if n, err := strconv.Atoi(s.Default); err != nil || n != want {
			t.Errorf("%s: the list says %q, execapi %d", s.Name, s.Default, want)
		}
	}
}
