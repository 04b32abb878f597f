package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// These tests build the real binary and drive it as a user would, on the real
// images (run `scratchrun images build` first; missing images fail the tests).

var (
	binary string
	// The binaries these tests start use a state directory and cgroup parent
	// of this test run's own, so that leak checks see only their sandboxes
	// (package testenv's environment, with no backend in this process).
	env          = testenv.New("clitest")
	cli          = env.Level("namespaces", nil)
	stateDir     = cli.StateDir
	cgroupParent = cli.CgroupParent
	leakOpts     = cli.Leak
)

func TestMain(m *testing.M) {
	// The test binary as the command itself (asCLI), for tests of what a
	// command prints in the fast tier, where the binary is not built.
	if os.Getenv(asCLIEnv) == "1" {
		os.Exit(run(os.Args[1:]))
	}
	flag.Parse()
	if testing.Short() {
		// The fast tier: the tests of the built binary skip (they need
		// root and the images), so it is not built; the flag and
		// configuration tests run in this process.
		os.Exit(m.Run())
	}
	// World-readable so that the unprivileged-user test can execute it.
	dir, err := os.MkdirTemp("", "scratchrun-cli-test-")
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "scratchrun")
	// Both binaries, side by side, as install.sh puts them.
	build := exec.Command("go", "build", "-o", dir+"/", ".", "../scratchrun-init")
	build.Stdout, build.Stderr = os.Stdout, os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("build scratchrun: " + err.Error())
	}
	os.Setenv("SCRATCHRUN_STATE_DIR", stateDir)
	os.Setenv("SCRATCHRUN_CGROUP_PARENT", cgroupParent)
	env.AtEnd(postgres.StopShared) // the key stores of the serve and keys tests
	// The servers these tests start admit by memory and count as servers
	// do, but not by CPU pressure, which is the whole machine's: another
	// suite's load would turn these tests' calls away. Admission's CPU
	// condition is tested where it is decided (internal/admission,
	// internal/engine) and in TestServeDescribesAdmission.
	os.Setenv("SCRATCHRUN_CPU_THRESHOLD", "0")
	code := env.Run(m)
	os.RemoveAll(dir)
	os.Exit(code)
}

type cliResult struct {
	stdout, stderr string
	code           int
}

// scratchrun runs the binary in dir with args and optional stdin.
func scratchrun(t *testing.T, dir, stdin string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Stdin = strings.NewReader(stdin)
	return runCLI(t, cmd)
}

// runCLI runs cmd, a scratchrun command, and returns what it printed and
// its exit status; t fails when it cannot run at all.
func runCLI(t *testing.T, cmd *exec.Cmd) cliResult {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run %v: %v", cmd.Args, err)
	}
	return cliResult{out.String(), errb.String(), code}
}

func TestExecCode(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", "python3.13", "--code", "print(1)")
	if r.code != 0 || r.stdout != "1\n" {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}

// The README's second form: a script file, env, an input file from the host,
// a returned file written into the current directory, and the exit code.
func TestExecScriptWithEnvFilesAndReturn(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "script.sh"), []byte("cat /tmp/in.csv | tr a-z A-Z > /tmp/out.csv\necho \"hello $NAME\"\necho warn >&2\nexit 3\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "data.csv"), []byte("a,b\n1,2\n"), 0o644)
	r := scratchrun(t, dir, "", "exec", "--runtime", "bash", "script.sh", "--env", "NAME=value",
		"--file", "/tmp/in.csv=@data.csv", "--return", "/tmp/out.csv")
	if r.code != 3 || r.stdout != "hello value\n" || !strings.HasPrefix(r.stderr, "warn\n") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	got, err := os.ReadFile(filepath.Join(dir, "out.csv"))
	if err != nil || string(got) != "A,B\n1,2\n" {
		t.Errorf("out.csv = %q, %v", got, err)
	}
}

// --request prints exactly the contract's result JSON.
func TestExecRequestJSON(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	req := `{"runtime": "python3.13", "code": "import os\nprint(os.environ['K'])\nopen('/tmp/o.bin','wb').write(bytes(range(256)))",
	         "limits": {"timeout_ms": 5000, "memory_mb": 128}, "env": {"K": "v"},
	         "files": {"/tmp/in.txt": "x"}, "return_files": ["/tmp/o.bin", "/tmp/missing"], "unknown_field": 1}`
	os.WriteFile(filepath.Join(dir, "req.json"), []byte(req), 0o644)
	for _, args := range [][]string{{"exec", "--request", "req.json"}, {"exec", "--request", "-"}} {
		stdin := ""
		if args[2] == "-" {
			stdin = req
		}
		r := scratchrun(t, dir, stdin, args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d stderr %q", args, r.code, r.stderr)
		}
		var res map[string]any
		if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
			t.Fatalf("%v: not JSON: %v\n%s", args, err, r.stdout)
		}
		// The contract's seven fields, and the two extensions (outcome, facts).
		for _, k := range []string{"exit_code", "stdout", "stderr", "execution_ms", "state_purged", "files", "note", "outcome", "facts"} {
			if _, ok := res[k]; !ok {
				t.Errorf("result lacks %q: %s", k, r.stdout)
			}
		}
		if len(res) != 9 {
			t.Errorf("result has %d fields, want exactly 9: %s", len(res), r.stdout)
		}
		if res["stdout"] != "v\n" || res["state_purged"] != true {
			t.Errorf("result %s", r.stdout)
		}
		files := res["files"].(map[string]any)
		if files["/tmp/o.bin"] == nil || !strings.Contains(res["note"].(string), "/tmp/missing") {
			t.Errorf("files %v note %q", files, res["note"])
		}
	}
}

func TestExecBadInputExits2(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "bad.json"), []byte(`{"runtime": "bash", "code": "x", "limits": {"timeout_ms": "soon"}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "zero.json"), []byte(`{"runtime": "bash", "code": "x", "limits": {"memory_mb": 0}}`), 0o644)
	os.WriteFile(filepath.Join(dir, "dup.json"), []byte(`{"runtime": "bash", "code": "x", "network": "none", "NETWORK": "egress"}`), 0o644)
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--runtime", "cobol", "--code", "x"}, "installed runtimes"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--timeout-ms", "99999"}, "limits.timeout_ms"},
		// 0 is out of range like any value, not "the default" (it was).
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--timeout-ms", "0"}, "limits.timeout_ms: is 0"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--memory-mb", "0"}, "limits.memory_mb: is 0"},
		{[]string{"exec", "--request", "zero.json"}, "limits.memory_mb: is 0"},
		{[]string{"exec", "--request", "dup.json"}, "NETWORK: is not a field"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--return", "relative.txt"}, "return_files[0]"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--env", "NOEQUALS"}, "--env"},
		{[]string{"exec", "--request", "bad.json"}, "limits.timeout_ms"},
		{[]string{"exec", "--no-such-flag"}, "no-such-flag"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--network", "egress"}, "network"},
		{[]string{"exec", "--runtime", "bash", "--code", "x", "--network", "internet"}, "network"},
	}
	for _, c := range cases {
		r := scratchrun(t, dir, "", c.args...)
		if r.code != 2 || !strings.Contains(r.stdout+r.stderr, c.want) {
			t.Errorf("%v: exit %d, output %q %q; want exit 2 mentioning %q", c.args, r.code, r.stdout, r.stderr, c.want)
		}
	}
	r := scratchrun(t, dir, "", "exec", "--request", "bad.json")
	if !strings.Contains(r.stdout, `"code": "invalid_request"`) {
		t.Errorf("--request error is not the contract's error JSON: %q", r.stdout)
	}
}

func TestImagesList(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	r := scratchrun(t, t.TempDir(), "", "images", "list")
	if r.code != 0 {
		t.Fatalf("exit %d stderr %q", r.code, r.stderr)
	}
	for _, want := range []string{"trixie", "bookworm", "python3.13", "python3.11", "node20", "bash"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("images list lacks %q:\n%s", want, r.stdout)
		}
	}
}

// The README's main job: the chart example writes a real PNG here.
func TestChartExample(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	dir := t.TempDir()
	example, _ := filepath.Abs("../../examples/chart.py")
	r := scratchrun(t, dir, "", "exec", "--runtime", "python3.13", example, "--return", "/tmp/chart.png")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "mean of damped wave:") {
		t.Fatalf("exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
	f, err := os.Open(filepath.Join(dir, "chart.png"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := png.Decode(f); err != nil {
		t.Errorf("chart.png is not a PNG: %v", err)
	}
}
