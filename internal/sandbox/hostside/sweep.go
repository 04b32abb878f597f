package hostside

import (
	"log/slog"

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
	return m.Sweep(EngineAlive)
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
