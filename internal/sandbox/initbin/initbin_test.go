package initbin

import (
	"os"
	"strings"
	"testing"
)

func TestInstanceNameAndAliveness(t *testing.T) {
	name, err := InstanceName(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !EngineAlive(name + "_1") {
		t.Errorf("%s_1: this engine reported dead", name)
	}
	if EngineAlive(strings.Replace(name, "_", "_9", 1) + "_1") {
		t.Errorf("an engine with another start time reported alive")
	}
	if !EngineAlive("not-ours") {
		t.Errorf("a foreign name must count as alive (never touched)")
	}
}

func TestInstallCopiesExecutable(t *testing.T) {
	dir := t.TempDir()
	src := Source("")
	p, err := Install(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("copy %s: %v %v", p, fi, err)
	}
	if again, err := Install(dir, src); err != nil || again != p {
		t.Errorf("second install: %s %v", again, err)
	}
}
