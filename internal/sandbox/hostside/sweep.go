package hostside

import (
	"errors"
	"log/slog"
	"path/filepath"

	"github.com/scratchrun/scratchrun/internal/sandbox/cgroups"
)

// SweepDeadEngines removes the cgroups that engines no longer running left
// under m's parent (their processes are killed first) and counts them.
// Groups of live engines, and groups not named as sandboxes are, are never
// touched (EngineAlive). A nil m has nothing to sweep.
func SweepDeadEngines(m *cgroups.Manager) (int, error) {
	if m == nil {
		return 0, nil
	}
	// On cgroup v1 a sandbox's group stands under each controller's parent.
	names := map[string]bool{}
	for _, dir := range m.Leftovers() {
		names[filepath.Base(dir)] = true
	}
	removed := 0
	var errs []error
	for name := range names {
		if EngineAlive(name) {
			continue
		}
		n, err := m.SweepOne(name)
		removed += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// LogSweep says what a backend's sweep at start did: what names the
// leftovers ("gVisor sandboxes"), n how many it removed. A sweep that
// failed is a warning, not a failure: the engine runs beside what it could
// not remove.
func LogSweep(logger *slog.Logger, what string, n int, err error) {
	if err != nil {
		logger.Warn("cleaning up "+what+" of an earlier engine", "err", err)
	} else if n > 0 {
		logger.Info("removed "+what+" left by an earlier engine", "count", n)
	}
}
