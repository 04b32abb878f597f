package main

import (
	"bytes"
	"context"
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/admission"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/mcpserver"
	"github.com/scratchrun/scratchrun/internal/mcpserver/remote"
	"github.com/scratchrun/scratchrun/internal/netpolicy"
	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/sandboxtest"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// setupFor parses cmd's settings from args and the environment.
func setupFor(cmd settings.Command, args ...string) (engineSetup, *settings.Values, error) {
	fs := flag.NewFlagSet(string(cmd), flag.ContinueOnError)
	set := settings.Define(fs, cmd)
	if err := fs.Parse(args); err != nil {
		return engineSetup{}, nil, err
	}
	v, err := set.Resolve(os.Getenv)
	if err != nil {
		return engineSetup{}, nil, err
	}
	s, err := parseEngine(v, cmd)
	return s, v, err
}

// engineFor is the engine's configuration cmd would build.
func engineFor(cmd settings.Command, args ...string) (engine.Config, error) {
	s, _, err := setupFor(cmd, args...)
	return s.engine, err
}

// networkFor is the egress policy cmd would build (nil: no egress).
func networkFor(cmd settings.Command, args ...string) (*netpolicy.Config, error) {
	s, _, err := setupFor(cmd, args...)
	return s.network, err
}

// cleanSettings unsets every setting's variable for the test (TestMain
// sets some for the binaries it starts).
func cleanSettings(t *testing.T) {
	for _, s := range settings.All {
		if s.Env != "" {
			t.Setenv(s.Env, "")
		}
	}
}

// The list's literal defaults are the packages' own: reading no setting
// builds what the packages would by themselves.
func TestSettingsDefaultsAreThePackages(t *testing.T) {
	cleanSettings(t)
	s, _, err := setupFor(settings.Serve)
	if err != nil {
		t.Fatal(err)
	}
	want := engine.DefaultConfig()
	want.Admission, want.Pool = admission.Defaults(admission.MachineMemory()), engine.DefaultPoolConfig()
	got := s.engine
	if got.Policy != want.Policy || got.OutputLimitBytes != want.OutputLimitBytes || got.MaxReturnBytes != want.MaxReturnBytes ||
		got.MaxPids != want.MaxPids || got.CPUs != want.CPUs || got.TmpBytes != want.TmpBytes || got.WritableBytes != want.WritableBytes {
		t.Errorf("engine: %+v\nwant %+v", got, want)
	}
	if got.Admission != want.Admission {
		t.Errorf("admission: %+v, want %+v", got.Admission, want.Admission)
	}
	if !slices.Equal(got.Pool.Networks, want.Pool.Networks) || got.Pool.Floor != want.Pool.Floor || got.Pool.Max != want.Pool.Max ||
		got.Pool.MemoryBudgetBytes != want.Pool.MemoryBudgetBytes || got.Pool.Builders != want.Pool.Builders {
		t.Errorf("pool: %+v, want %+v", got.Pool, want.Pool)
	}
	t.Setenv("SCRATCHRUN_ALLOW_EGRESS", "1")
	nc, err := networkFor(settings.Exec)
	if wantNC := netpolicy.DefaultConfig(); err != nil || nc.Subnet != wantNC.Subnet || nc.MaxConnections != wantNC.MaxConnections ||
		nc.NewConnectionsPerSecond != wantNC.NewConnectionsPerSecond || nc.DNS != nil || nc.LockDir != wantNC.LockDir {
		t.Errorf("network: %+v %v, want %+v", nc, err, wantNC)
	}
	for text, want := range map[string]string{
		settings.MCPMaxSessions.DefaultText:    strconv.Itoa(mcpserver.DefaultMaxSessions),
		settings.MCPSessionsPerKey.DefaultText: strconv.Itoa(mcpserver.DefaultMaxSessionsPerCaller),
		settings.MCPSessionIdle.DefaultText:    mcpserver.DefaultSessionTimeout.String(),
		settings.APIURL.Default:                remote.DefaultURL,
		settings.QueueWait.Default:             admission.DefaultQueueWait.String(),
		settings.Capacity.DefaultText:          strconv.Itoa(admission.HardCapacity) + ", a safety bound",
	} {
		if text != want {
			t.Errorf("the list says %q, the package %q", text, want)
		}
	}
	if frontend.DefaultQueueWait != admission.DefaultQueueWait {
		t.Errorf("a front end's default queue wait %s is not a server's %s", frontend.DefaultQueueWait, admission.DefaultQueueWait)
	}
}

// SCRATCHRUN_ALLOW_EGRESS is read by one rule everywhere: "0" is no
// egress for the policy and for the warm pool alike (the pool used to
// warm egress sandboxes for any non-empty value), and egress as the
// default network warms them too.
func TestAllowEgressIsOneBool(t *testing.T) {
	cleanSettings(t)
	t.Setenv("SCRATCHRUN_ALLOW_EGRESS", "0")
	s, _, err := setupFor(settings.Serve)
	if err != nil || s.engine.Policy.AllowEgress || s.network != nil || slices.Contains(s.engine.Pool.Networks, execapi.NetworkEgress) {
		t.Errorf("SCRATCHRUN_ALLOW_EGRESS=0: allowed %v, network %v, pool %v, %v", s.engine.Policy.AllowEgress, s.network, s.engine.Pool.Networks, err)
	}
	for _, c := range []struct {
		env  string
		args []string
	}{{"true", nil}, {"", []string{"--allow-egress"}}, {"", []string{"--network-default", "egress"}}} {
		t.Setenv("SCRATCHRUN_ALLOW_EGRESS", c.env)
		s, _, err := setupFor(settings.Serve, c.args...)
		if err != nil || !s.engine.Policy.AllowEgress || s.network == nil || !slices.Contains(s.engine.Pool.Networks, execapi.NetworkEgress) {
			t.Errorf("%q %v: allowed %v, network %v, pool %v, %v", c.env, c.args, s.engine.Policy.AllowEgress, s.network, s.engine.Pool.Networks, err)
		}
	}
	t.Setenv("SCRATCHRUN_ALLOW_EGRESS", "yes")
	if _, _, err := setupFor(settings.Serve); err == nil || !strings.Contains(err.Error(), "SCRATCHRUN_ALLOW_EGRESS") {
		t.Errorf("yes: %v", err)
	}
}

// The other booleans that were read as "non-empty" or as exactly "1"
// take the same rule: SCRATCHRUN_DEBUG=0 is no debug logging, and
// SCRATCHRUN_NATS_ALLOW_INSECURE=true allows what =1 does.
func TestBooleanVariablesAreBooleans(t *testing.T) {
	cleanSettings(t)
	t.Setenv("SCRATCHRUN_DEBUG", "0")
	t.Setenv("SCRATCHRUN_NATS_ALLOW_INSECURE", "true")
	v, err := settings.Environment(os.Getenv, settings.Worker)
	if err != nil {
		t.Fatal(err)
	}
	if newLogger(v.Bool(settings.Debug)).Enabled(context.Background(), -4) {
		t.Error("SCRATCHRUN_DEBUG=0 logs at debug level")
	}
	n := parseNATS(v)
	n.urls = []string{"nats://10.9.8.7:4222"}
	if _, err := n.options("test", nil); err != nil {
		t.Errorf("SCRATCHRUN_NATS_ALLOW_INSECURE=true: %v", err)
	}
}

// The queue wait has one convention where it is read (0: no waiting),
// turned into admission's and the front end's in one place: 0 is
// negative for both (admission would wait as long as the context allows,
// the front end its default), and a worker never waits.
func TestQueueWaitOneConvention(t *testing.T) {
	cleanSettings(t)
	t.Setenv("SCRATCHRUN_QUEUE_WAIT", "0")
	if cfg, err := engineFor(settings.Serve); err != nil || cfg.Admission.QueueWait >= 0 {
		t.Errorf("serve: %v %v, want no waiting", cfg.Admission.QueueWait, err)
	}
	t.Setenv("SCRATCHRUN_NATS", "nats://127.0.0.1:4222")
	c, _, ok := parseServe(nil)
	if !ok || c.frontend.queueWait.frontend() >= 0 || c.frontend.drainTimeout() != c.frontend.policy.MaxTimeout+httpapi.DrainAllowance {
		t.Errorf("front end: %v (drain %v), want no waiting", c.frontend.queueWait.frontend(), c.frontend.drainTimeout())
	}
	t.Setenv("SCRATCHRUN_QUEUE_WAIT", "1500ms")
	if c, _, ok := parseServe(nil); !ok || c.frontend.queueWait.frontend() != 1500*1e6 {
		t.Errorf("front end: %v", c.frontend.queueWait.frontend())
	}
	if cfg, err := engineFor(settings.Serve); err != nil || cfg.Admission.QueueWait != 1500*1e6 {
		t.Errorf("serve: %v %v", cfg.Admission.QueueWait, err)
	}
	if c, _, ok := parseWorker(nil); !ok || c.local.engine.Admission.QueueWait >= 0 {
		t.Errorf("worker: %v, want no waiting", c.local.engine.Admission.QueueWait)
	}
}

// The refusal to run as root without limits words the backend's own
// reason, a fact of its own (sandbox.UnenforcedReason), whatever other
// sentences the backend has (it used to pick the last one that said
// " NOT enforced").
func TestUnenforcedRefusalNamesTheBackendsReason(t *testing.T) {
	b := sentences{&sandboxtest.Backend{Unenforced: []sandbox.Limit{sandbox.LimitMemory}, UnenforcedReason: "no memory controller"},
		[]string{"egress is NOT enforced by nftables here"}}
	err := unenforcedRefusal(b, true, false)
	if err == nil || !strings.Contains(err.Error(), "memory limits are NOT enforced (no memory controller)") || strings.Contains(err.Error(), "egress") {
		t.Errorf("root: %v", err)
	}
	if err := unenforcedRefusal(b, false, false); err != nil {
		t.Errorf("an ordinary user: %v", err)
	}
	if err := unenforcedRefusal(b, true, true); err != nil {
		t.Errorf("allowed: %v", err)
	}
}

// sentences is a backend with other sentences for an operator.
type sentences struct {
	*sandboxtest.Backend
	lines []string
}

func (s sentences) Limitations() []string { return s.lines }

// Every SCRATCHRUN_ variable the code reads is a declared setting (one
// was undocumented: SCRATCHRUN_GVISOR_PLATFORM), and cmd/scratchrun
// reads none but through the registry.
func TestEveryVariableIsDeclared(t *testing.T) {
	// Not settings: set inside sandboxes, a C header guard, a shell
	// placeholder in the console's snippets, a prefix, a test's hook set
	// in a zygote only (refused outside tests).
	notSettings := []string{"SCRATCHRUN_PRELOAD", "SCRATCHRUN_INITPROTO_H", "SCRATCHRUN_AUTH", "SCRATCHRUN_NATS_", "SCRATCHRUN_ZYGOTE_TEST_HOOK"}
	lit := regexp.MustCompile(`^"(SCRATCHRUN_[A-Z0-9_]+)`)
	for _, root := range []string{".", "../../internal"} {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() && (d.Name() == "testenv" || d.Name() == "testdata") {
				if err == nil {
					return filepath.SkipDir
				}
				return err
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if call, ok := n.(*ast.CallExpr); ok && root == "." {
					if sel, ok := call.Fun.(*ast.SelectorExpr); ok && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv") && len(call.Args) == 1 {
						if l, ok := call.Args[0].(*ast.BasicLit); ok && strings.Contains(l.Value, "SCRATCHRUN_") {
							t.Errorf("%s reads %s itself, not through internal/settings", path, l.Value)
						}
					}
				}
				l, ok := n.(*ast.BasicLit)
				if !ok || l.Kind != token.STRING {
					return true
				}
				if m := lit.FindStringSubmatch(l.Value); m != nil && !slices.Contains(notSettings, m[1]) && settings.Lookup(m[1]) == nil {
					t.Errorf("%s names %s, which internal/settings does not declare", path, m[1])
				}
				return true
			})
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Each command's --help lists every setting it reads, by flag or by
// variable, and each parse reads only settings that apply to it (a
// reader of another command's setting panics).
func TestEveryCommandsHelpAndParse(t *testing.T) {
	cleanSettings(t)
	for _, c := range []struct {
		cmds []settings.Command
		head string
	}{
		{[]settings.Command{settings.Exec}, execHelp}, {[]settings.Command{settings.MCP}, mcpHelp},
		{[]settings.Command{settings.Serve, settings.Frontend}, serveHelp}, {[]settings.Command{settings.Worker}, workerHelp},
	} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		withSettings(fs, c.head, c.cmds...)
		var out bytes.Buffer
		fs.SetOutput(&out)
		fs.Usage()
		for _, s := range settings.For(c.cmds...) {
			if s.Flag != "" && !strings.Contains(out.String(), "  -"+s.Flag+" ") && !strings.Contains(out.String(), "  -"+s.Flag+"\n") ||
				s.Env != "" && !strings.Contains(out.String(), s.Env) {
				t.Errorf("%v --help does not list %s", c.cmds, s.Name)
			}
		}
	}
	if _, _, ok := parseServe(nil); !ok {
		t.Error("serve")
	}
	if _, _, ok := parseServe([]string{"--nats", "nats://127.0.0.1:4222"}); !ok {
		t.Error("serve --nats")
	}
	if _, _, ok := parseMCP(nil); !ok {
		t.Error("mcp")
	}
	if _, _, ok := parseWorker([]string{"--nats", "nats://127.0.0.1:4222"}); !ok {
		t.Error("worker")
	}
	for _, cmd := range []settings.Command{settings.Exec, settings.Bench} {
		if _, _, err := setupFor(cmd, "--allow-egress"); err != nil {
			t.Errorf("%s: %v", cmd, err)
		}
	}
}
