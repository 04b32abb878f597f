package main

import (
	"os"
	"os/exec"
	"testing"
)

// asCLIEnv set to 1 makes the test binary run as scratchrun (TestMain).
const asCLIEnv = "SCRATCHRUN_TEST_AS_CLI"

// asCLI runs this test binary as `scratchrun args...`: a command's real
// output, in a process of its own, with no build of the binary.
func asCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asCLIEnv+"=1"), env...)
	return runCLI(t, cmd)
}
