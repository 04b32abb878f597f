//go:build linux

package client_test

import (
	"bufio"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// logBuffer collects a process's output for messages while it still writes.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// listening is serve's line saying where it listens.
var listening = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)`)

// server is a `scratchrun serve` of a test, with its key store.
type server struct {
	url string
	db  string
}

// newServer is a server's fresh key store, for its keys to be made before
// it starts (a server that starts with no key serves in open mode).
func newServer(t *testing.T) *server {
	t.Helper()
	testenv.SkipIfShort(t, "runs `scratchrun serve` with real sandboxes")
	return &server{db: t.TempDir() + "/keys.db"}
}

// start runs `scratchrun serve` on a free loopback port over the key store
// (as cmd/scratchrun's startServe does, for this package). At the test's
// end serve gets SIGTERM and must exit within a minute.
func (s *server) start(t *testing.T) {
	t.Helper()
	cmd := exec.Command(scratchrunBin(), "serve", "--addr", "127.0.0.1:0", "--db", s.db)
	// CPU pressure is the whole machine's: another suite's load would turn
	// these calls away (admission's CPU condition is tested where it is
	// decided).
	cmd.Env = append(os.Environ(), "SCRATCHRUN_STATE_DIR="+lvl.StateDir, "SCRATCHRUN_CGROUP_PARENT="+lvl.CgroupParent,
		"SCRATCHRUN_CPU_THRESHOLD=0")
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	found := make(chan string, 1)
	exited := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			logs.Write([]byte(sc.Text() + "\n"))
			if m := listening.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		cmd.Wait() // once stderr is read to its end, as StderrPipe requires
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-exited
			t.Errorf("serve did not exit within a minute of SIGTERM:\n%s", logs.String())
		}
		if t.Failed() {
			t.Logf("serve's log:\n%s", logs.String())
		}
	})
	select {
	case s.url = <-found:
	case <-exited:
		t.Fatalf("serve exited before it listened:\n%s", logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not listen within a minute:\n%s", logs.String())
	}
}

// keysCmd runs `scratchrun keys ARGS --db` of the server and returns its
// standard output.
func (s *server) keysCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(scratchrunBin(), append(append([]string{"keys"}, args...), "--db", s.db)...).Output()
	if err != nil {
		t.Fatalf("keys %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// key makes a key named name (extra: --concurrency 1, say) and returns it.
func (s *server) key(t *testing.T, name string, extra ...string) string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(s.keysCmd(t, append([]string{"create", "--name", name}, extra...)...)), "\n")
	key := lines[len(lines)-1]
	if !strings.HasPrefix(key, "sr_") || strings.ContainsAny(key, " \t") {
		t.Fatalf("keys create's last line %q is not a key", key)
	}
	return key
}

// usageRows are the usage rows of the key named name.
func (s *server) usageRows(t *testing.T, name string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(s.keysCmd(t, "usage", "--key", name, "--runs")), "\n")
	return lines[1:] // the header
}
