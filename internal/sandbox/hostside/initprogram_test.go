package hostside

import (
	"os"
	"testing"
)

func TestInstallCopiesExecutable(t *testing.T) {
	dir := t.TempDir()
	src := InitProgram("")
	p, err := InstallInitProgram(dir, src)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o755 {
		t.Fatalf("copy %s: %v %v", p, fi, err)
	}
	if again, err := InstallInitProgram(dir, src); err != nil || again != p {
		t.Errorf("second install: %s %v", again, err)
	}
}
