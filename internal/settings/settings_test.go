package settings

import (
	"flag"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// Every flag and variable belongs to one setting, every default reads by
// its setting's own rule, and every setting says where it applies and
// what it is for.
func TestListIsConsistent(t *testing.T) {
	flags, envs, names := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, s := range All {
		if s.Flag != "" && flags[s.Flag] || s.Env != "" && envs[s.Env] || names[s.Name] {
			t.Errorf("%s: flag, variable or name used twice", s.Name)
		}
		flags[s.Flag], envs[s.Env], names[s.Name] = s.Flag != "", s.Env != "", true
		if s.Flag == "" && s.Env == "" || s.Help == "" || len(s.Commands) == 0 || s.Type == "" {
			t.Errorf("%s: needs a flag or a variable, help, commands and a type", s.Name)
		}
		if s.Env != "" && !strings.HasPrefix(s.Env, "SCRATCHRUN_") {
			t.Errorf("%s: variable %s outside SCRATCHRUN_", s.Name, s.Env)
		}
		if s.Default != "" {
			if _, err := parse(s, s.Default); err != nil {
				t.Errorf("%s: default %q: %v", s.Name, s.Default, err)
			}
		}
		if s.Type == Enum && len(s.Allowed) == 0 {
			t.Errorf("%s: an enum with no values", s.Name)
		}
	}
}

// A flag beats the variable, which beats the default; an empty variable
// is unset.
func TestFlagBeatsEnvBeatsDefault(t *testing.T) {
	env := map[string]string{}
	resolve := func(args ...string) *Values {
		t.Helper()
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		set := Define(fs, Serve)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		v, err := set.Resolve(func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := resolve(); v.Duration(QueueWait) != 2*time.Second || v.From(QueueWait) != FromDefault || v.IsSet(QueueWait) {
		t.Errorf("default: %v from %v", v.Duration(QueueWait), v.From(QueueWait))
	}
	env["SCRATCHRUN_QUEUE_WAIT"] = ""
	if v := resolve(); v.From(QueueWait) != FromDefault {
		t.Errorf("an empty variable counted: %v", v.From(QueueWait))
	}
	env["SCRATCHRUN_QUEUE_WAIT"] = "5s"
	if v := resolve(); v.Duration(QueueWait) != 5*time.Second || v.From(QueueWait) != FromEnv {
		t.Errorf("variable: %v from %v", v.Duration(QueueWait), v.From(QueueWait))
	}
	if v := resolve("--queue-wait", "0"); v.Duration(QueueWait) != 0 || v.From(QueueWait) != FromFlag {
		t.Errorf("flag: %v from %v", v.Duration(QueueWait), v.From(QueueWait))
	}
	env["SCRATCHRUN_ALLOW_EGRESS"] = "true"
	if v := resolve("--allow-egress=false"); v.Bool(AllowEgress) {
		t.Error("--allow-egress=false lost to the variable")
	}
	if v := resolve(); !v.Bool(AllowEgress) {
		t.Error("SCRATCHRUN_ALLOW_EGRESS=true not read")
	}
}

// Each type has one rule, and a bad value's error names where it came
// from and what is allowed.
func TestBadValuesNameTheirSourceAndRange(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{nil, map[string]string{"SCRATCHRUN_ALLOW_EGRESS": "yes"}, `SCRATCHRUN_ALLOW_EGRESS="yes": want 1 or 0`},
		{[]string{"--allow-egress=maybe"}, nil, `--allow-egress "maybe": want 1 or 0`},
		{[]string{"--capacity", "-1"}, nil, "--capacity must not be negative"},
		{nil, map[string]string{"SCRATCHRUN_MAX_PIDS": "0"}, `SCRATCHRUN_MAX_PIDS="0": want a positive integer`},
		{nil, map[string]string{"SCRATCHRUN_EGRESS_MAX_CONNECTIONS": "many"}, "an integer from 1 to 1048576"},
		{[]string{"--cpu-threshold", "2"}, nil, `--cpu-threshold "2": want a share from 0 to 1`},
		{[]string{"--memory-budget", "lots"}, nil, `--memory-budget "lots": want a size from 0 to 1PiB`},
		{[]string{"--queue-wait", "-1s"}, nil, "--queue-wait must not be negative"},
		{[]string{"--isolation", "docker"}, nil, `want "namespaces", "gvisor" or "microvm"`},
		{nil, map[string]string{"SCRATCHRUN_GVISOR_PLATFORM": "fast"}, `SCRATCHRUN_GVISOR_PLATFORM="fast": want "systrap", "kvm" or "ptrace"`},
		{nil, map[string]string{"SCRATCHRUN_DNS": "one.one"}, `"one.one" is not an IP address`},
		{nil, map[string]string{"SCRATCHRUN_EGRESS_BLOCK": "10.0.0.0/33"}, "SCRATCHRUN_EGRESS_BLOCK"},
		{[]string{"--addr", "8722"}, nil, "--addr \"8722\": want HOST:PORT"},
		{[]string{"--max-body", "0"}, nil, "--max-body"},
	} {
		fs := flag.NewFlagSet("serve", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		set := Define(fs, Serve, Frontend)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		_, err := set.Resolve(func(k string) string { return c.env[k] })
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v %v: %v, want %q", c.args, c.env, err, c.want)
		}
	}
}

// Sizes take units; a bare number counts the setting's unit, so that
// --memory-budget and SCRATCHRUN_MEMORY_BUDGET_MB read "16384" alike.
func TestSizes(t *testing.T) {
	for text, want := range map[string]int64{"16GiB": 16 << 30, "16384": 16 << 30, "512 MiB": 512 << 20, "0": 0, "1g": 1 << 30} {
		if n, err := parse(MemoryBudget, text); err != nil || n.(int64) != want {
			t.Errorf("memory budget %q: %v %v, want %d", text, n, err, want)
		}
	}
	if n, err := parse(MaxBody, "1048576"); err != nil || n.(int64) != 1<<20 {
		t.Errorf("max body in bytes: %v %v", n, err)
	}
	if _, err := ParseSize("0"); err == nil {
		t.Error("ParseSize took 0")
	}
}

// A front end refuses the flags of an engine it has not: Given names
// them in flag.Visit's order.
func TestGivenNotForFrontend(t *testing.T) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	set := Define(fs, Serve, Frontend)
	if err := fs.Parse([]string{"--queue-wait", "1s", "--isolation", "gvisor", "--capacity", "3"}); err != nil {
		t.Fatal(err)
	}
	if got := set.Given(Frontend); strings.Join(got, ",") != "capacity,isolation" {
		t.Errorf("given: %v", got)
	}
}

// docs/configuration.md and deploy/scratchrun.env are what the list
// generates.
func TestGeneratedFilesAreCurrent(t *testing.T) {
	for path, want := range map[string]string{"../../docs/configuration.md": Markdown(), "../../deploy/scratchrun.env": EnvFile()} {
		got, err := os.ReadFile(path)
		if err != nil || string(got) != want {
			t.Errorf("%s is not what internal/settings generates (%v); from the repository's root run:\n  %s", path, err, RegenerateDocs)
		}
	}
}
