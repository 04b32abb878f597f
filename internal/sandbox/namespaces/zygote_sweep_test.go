package namespaces

import (
	"os"
	"path/filepath"
	"testing"
)

// A dead engine's zygote stages are removed; a live engine's, a stage
// that is not empty and anything else in the state directory are not.
func TestSweepZygoteStagesOfDeadEngines(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"zygote-e1_1-123", "zygote-e2_2-456", "zygote-e1_1-789", "zygote-odd", "mnt"} {
		if err := os.Mkdir(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "zygote-e1_1-789", "left"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := sweepZygoteStages(dir, func(instance string) bool { return instance == "e2_2" })
	if n != 1 || err == nil {
		t.Errorf("swept %d (err %v), want 1 and an error for the stage that is not empty", n, err)
	}
	for name, want := range map[string]bool{"zygote-e1_1-123": false, "zygote-e2_2-456": true, "zygote-e1_1-789": true, "zygote-odd": true, "mnt": true} {
		if _, err := os.Stat(filepath.Join(dir, name)); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", name, err == nil, want)
		}
	}
}
