package openapi

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// lintDir is test/openapi: @redocly/cli pinned by its lock file, and
// redocly.yaml (the recommended rules; the rules turned off say why).
func lintDir(t *testing.T) string {
	t.Helper()
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..", "test", "openapi")
}

// Both documents, the base and the one with sessions merged in, pass an
// independent linter, Redocly's, with its recommended rules: no error and
// no warning.
func TestRedoclyLint(t *testing.T) {
	dir := lintDir(t)
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed: the lint needs Node.js 20 or later and npm (scripts/test.sh installs them)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	redocly := filepath.Join(dir, "node_modules", ".bin", "redocly")
	if _, err := os.Stat(redocly); err != nil {
		// scripts/test.sh runs npm ci; a checkout that did not gets it here.
		cmd := exec.CommandContext(ctx, "npm", "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in test/openapi: %v\n%s", err, out)
		}
	}
	merged := filepath.Join(t.TempDir(), "openapi-sessions.json")
	if err := os.WriteFile(merged, JSON(true), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		args []string
	}{
		// The committed file, as redocly.yaml names it.
		{"base", nil},
		// The merged document, linted with the same rules.
		{"sessions", []string{merged}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			args := append([]string{"lint", "--config", "redocly.yaml", "--format", "json"}, mode.args...)
			cmd := exec.CommandContext(ctx, redocly, args...)
			cmd.Dir = dir
			// Nothing leaves the machine: no telemetry, no update check.
			cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_UPDATE_NOTIFIER=1")
			out, err := cmd.Output()
			var report struct {
				Totals struct {
					Errors, Warnings int
				}
				Problems []json.RawMessage
			}
			if jerr := json.Unmarshal(out, &report); jerr != nil {
				t.Fatalf("redocly lint: %v (%v); it printed:\n%s", err, jerr, out)
			}
			if err != nil || report.Totals.Errors != 0 || report.Totals.Warnings != 0 {
				t.Errorf("redocly lint: %v, %d errors, %d warnings:", err, report.Totals.Errors, report.Totals.Warnings)
				for _, p := range report.Problems {
					t.Errorf("  %s", p)
				}
			}
		})
	}
}

// With sessions off, JSON is openapi.json as committed, byte for byte,
// and each caller gets a copy.
func TestJSONIsTheCommittedFile(t *testing.T) {
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	got := JSON(false)
	if string(got) != string(file) {
		t.Fatal("JSON(false) differs from openapi.json")
	}
	got[0] = 'x'
	if JSON(false)[0] != file[0] {
		t.Error("a caller changed the embedded document")
	}
	if !json.Valid(file) {
		t.Error("openapi.json is not valid JSON")
	}
}
