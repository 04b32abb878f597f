package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// ordinaryUser is a throwaway account the test creates, as CI has no
// desktop user: the engine runs as it exactly as a desktop MCP client
// would start it.
type ordinaryUser struct {
	name     string
	uid, gid uint32
	home     string // a directory it owns, for its database and files
}

// newOrdinaryUser creates the account (useradd) and removes it, and what
// the engine kept for it, when the test ends.
func newOrdinaryUser(t *testing.T) *ordinaryUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a user")
	}
	userCount++
	name := fmt.Sprintf("srtest%d-%d", os.Getpid(), userCount)
	if out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
		t.Fatalf("useradd: %v: %s", err, out)
	}
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	o := &ordinaryUser{name: name, uid: uint32(uid), gid: uint32(gid), home: worldReadableTempDir(t)}
	if err := os.Chown(o.home, uid, gid); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		os.RemoveAll(filepath.Join(os.TempDir(), "scratchrun-"+u.Uid))
		// The engine's helper dies with it, a moment after it.
		var out []byte
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
			if out, err = exec.Command("userdel", name).CombinedOutput(); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Errorf("userdel: %v: %s", err, out)
		}
	})
	return o
}

// userCount makes each test's user a new one.
var userCount int

// command runs the scratchrun binary as the user, with a desktop session's
// kind of environment.
func (o *ordinaryUser) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, args...)
	cmd.Dir = o.home
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + o.home, "SCRATCHRUN_POOL_FLOOR=0",
		"SCRATCHRUN_CGROUP_PARENT=" + cgroupParent}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid}}
	return cmd
}

// An ordinary user without a delegated cgroup gets no memory, process or
// CPU limits, and is told so everywhere a caller looks: every result's note,
// the MCP tool's description and schema, GET /v1/runtimes, and the warning
// at start (a whole sentence).
func TestOrdinaryUserIsToldWhatIsNotEnforced(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	u := newOrdinaryUser(t)
	const note = "This host does not enforce the memory, process-count and CPU limits"

	cmd := u.command("exec", "--json", "--runtime", "python3.13", "--memory-mb", "64", "--code", "x = bytearray(300 << 20)\nprint('allocated')")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("exec as %s: %v: %s %s", u.name, err, out, stderr.String())
	}
	var res struct {
		Stdout, Note string
	}
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Stdout != "allocated\n" || !strings.Contains(res.Note, note) {
		t.Errorf("result %+v: want the run and a note %q", res, note)
	}
	warning := regexp.MustCompile(`(?m)^scratchrun: warning: memory, process-count and CPU limits are NOT enforced \(.+\); timeouts, output caps and file-system size caps still are\.$`)
	if !warning.MatchString(stderr.String()) {
		t.Errorf("start-up warning is not the whole sentence: %q", stderr.String())
	}

	// The MCP tool, as a desktop client sees it.
	mcpCmd := u.command("mcp")
	client := mcp.NewClient(&mcp.Implementation{Name: "ordinary-user-test", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.CommandTransport{Command: mcpCmd, TerminateDuration: 20 * time.Second}, nil)
	if err != nil {
		t.Fatalf("connect to scratchrun mcp as %s: %v", u.name, err)
	}
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil || len(tools.Tools) != 1 {
		t.Fatalf("tools/list: %v %v", tools, err)
	}
	tool := tools.Tools[0]
	if !strings.Contains(tool.Description, "NOT enforced on this host") || strings.Contains(tool.Description, "usually because the memory limit was hit") {
		t.Errorf("tool description does not say the limits are not enforced:\n%s", tool.Description)
	}
	schema, _ := json.Marshal(tool.InputSchema)
	if strings.Contains(string(schema), "Over it the program is killed") || !strings.Contains(string(schema), "NOT enforced") {
		t.Errorf("memory_mb still promises a kill: %s", schema)
	}
	call, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo via-mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	if text := call.Content[0].(*mcp.TextContent).Text; !strings.Contains(text, note) {
		t.Errorf("MCP result does not carry the note:\n%s", text)
	}
	cs.Close()

	// GET /v1/runtimes of a server run by the user.
	serve := u.command("serve", "--addr", "127.0.0.1:0", "--db", filepath.Join(u.home, "keys.db"))
	pipe, err := serve.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		serve.Process.Signal(syscall.SIGTERM)
		serve.Wait()
	}()
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`).FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
	}()
	var base string
	select {
	case base = <-url:
	case <-time.After(60 * time.Second):
		t.Fatal("serve as the user never listened")
	}
	resp, err := http.Get(base + "/v1/runtimes")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var info struct {
		UnenforcedLimits []string `json:"unenforced_limits"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
		t.Fatal(err)
	}
	if strings.Join(info.UnenforcedLimits, ",") != "memory,processes,cpu" {
		t.Errorf("/v1/runtimes unenforced_limits = %v, want [memory processes cpu]", info.UnenforcedLimits)
	}
}

// cgroup2Mount is where the unified hierarchy is mounted ("" when it is not).
func cgroup2Mount(t *testing.T) string {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if f := strings.Fields(pre); ok && len(f) >= 5 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	return ""
}

// An ordinary user whose own cgroup v2 is delegated to it (root made and
// chowned one, as cgroup v2 delegation prescribes and as systemd's
// Delegate=yes does) runs the engine inside it: the engine finds it, moves
// itself into a leaf, puts every sandbox in a group below it, and reports
// the controllers the group does not offer as unenforced. On this project's
// hybrid build machines the unified hierarchy has no controllers at all, so
// there the test proves discovery, use and honest reporting; on a host
// whose unified hierarchy offers memory it also proves the memory limit.
func TestOrdinaryUserUsesADelegatedCgroup(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	u := newOrdinaryUser(t)
	mnt := cgroup2Mount(t)
	if mnt == "" {
		t.Skip("no cgroup2 hierarchy mounted")
	}
	delegated := filepath.Join(mnt, fmt.Sprintf("scratchrun-clitest-delegated-%d", os.Getpid()))
	if err := os.Mkdir(delegated, 0o755); err != nil {
		t.Fatal(err)
	}
	defer func() {
		// The engine's helper (in the leaf) dies with it, a moment after it.
		leaf := filepath.Join(delegated, "scratchrun-engine")
		for deadline := time.Now().Add(10 * time.Second); readFileOr(filepath.Join(leaf, "cgroup.procs")) != "" && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		for _, d := range []string{filepath.Join(delegated, cgroupParent), leaf, delegated} {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("remove %s: %v", d, err)
			}
		}
	}()
	for _, p := range []string{delegated, delegated + "/cgroup.procs", delegated + "/cgroup.subtree_control", delegated + "/cgroup.threads"} {
		if err := os.Chown(p, int(u.uid), int(u.gid)); err != nil {
			t.Fatal(err)
		}
	}
	offered := strings.Fields(readFile(t, filepath.Join(mnt, "cgroup.controllers")))
	memory := false
	for _, c := range offered {
		memory = memory || c == "memory"
	}
	if memory {
		// Hand the controllers down to the delegated group, as systemd does.
		if err := os.WriteFile(filepath.Join(mnt, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0); err != nil {
			t.Logf("enable controllers at the root: %v", err)
		}
	}
	t.Logf("unified hierarchy at %s offers %q", mnt, offered)
	dirFD, err := syscall.Open(delegated, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(dirFD)

	cmd := u.command("exec", "--json", "--runtime", "python3.13", "--memory-mb", "64", "--code",
		"import time\ntime.sleep(2)\nx = bytearray(300 << 20)\nprint('allocated')")
	cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, dirFD
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout := &syncBuffer{}
	cmd.Stdout = stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// While the program sleeps: the engine sits in the leaf, the sandbox in a
	// group of its own below the delegated group.
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var engineCgroup string
	var sandboxProcs []string
	for len(sandboxProcs) == 0 {
		if own := readFileOr(fmt.Sprintf("/proc/%d/cgroup", cmd.Process.Pid)); own != "" {
			engineCgroup = strings.TrimSpace(own)
		}
		groups, _ := filepath.Glob(filepath.Join(delegated, cgroupParent, "e*"))
		for _, g := range groups {
			sandboxProcs = append(sandboxProcs, strings.Fields(readFileOr(filepath.Join(g, "cgroup.procs")))...)
		}
		select {
		case err = <-done:
			done <- err
		case <-time.After(20 * time.Millisecond):
			continue
		}
		break
	}
	err = <-done
	if !strings.HasSuffix(engineCgroup, "0::/"+filepath.Base(delegated)+"/scratchrun-engine") {
		t.Errorf("engine's cgroup %q: want the leaf of the delegated group", engineCgroup)
	}
	if len(sandboxProcs) == 0 {
		t.Errorf("no sandbox process was ever in a group below %s", delegated)
	}
	if memory {
		if cmd.ProcessState.ExitCode() != 0 || !strings.Contains(stdout.String(), "memory limit of 64 MB was hit") {
			t.Errorf("with a delegated memory controller, 300 MiB under memory_mb 64: %v %s %s", err, stdout.String(), stderr.String())
		}
		return
	}
	if err != nil || !strings.Contains(stdout.String(), `"stdout": "allocated\n"`) {
		t.Fatalf("exec in the delegated group: %v %s %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "does not enforce the memory, process-count and CPU limits") {
		t.Errorf("note does not say what the delegated group cannot enforce: %s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "the cgroup delegated to this user, "+delegated+", offers no memory, pids, cpu controller") {
		t.Errorf("warning does not name the delegated group and its missing controllers: %q", stderr.String())
	}
	if left, _ := filepath.Glob(filepath.Join(delegated, cgroupParent, "*", "cgroup.procs")); len(left) > 0 {
		t.Errorf("sandbox groups left: %v", left)
	}
}

func readFile(t *testing.T, path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func readFileOr(path string) string {
	data, _ := os.ReadFile(path)
	return string(data)
}

// An ordinary user's sandbox has a writable HOME (rootless, the image's
// /root belongs to a uid the sandbox does not map): a cold python3.13
// importing matplotlib prints nothing on stderr (it used to print "mkdir -p
// failed for path /root/.config/matplotlib: Permission denied"), finds the
// font cache the image baked instead of building one, and writing to $HOME
// works.
func TestOrdinaryUserHasAWritableHome(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	u := newOrdinaryUser(t)
	code := `import glob, os
baked = glob.glob(os.path.expanduser("~/.cache/matplotlib/fontlist-*.json"))
import matplotlib, matplotlib.pyplot
print(os.environ["HOME"], matplotlib.get_cachedir(), bool(baked))
with open(os.path.join(os.environ["HOME"], "notes.txt"), "w") as f:
    f.write("kept")
print(open(os.path.expanduser("~/notes.txt")).read())
`
	cmd := u.command("exec", "--runtime", "python3.13", "--code", code)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || string(out) != "/root /root/.cache/matplotlib True\nkept\n" {
		t.Errorf("as %s: %v stdout %q", u.name, err, out)
	}
	// Only the engine's own lines (warnings and notes, prefixed) may appear.
	for _, line := range strings.Split(strings.TrimSpace(stderr.String()), "\n") {
		if !strings.HasPrefix(line, "scratchrun: ") {
			t.Errorf("the program wrote to stderr: %q", line)
		}
	}
}
