package packaging

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// logBuffer collects a process's output for messages while the process
// still writes it.
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

// startServe runs the release's scratchrun of this machine's architecture
// as `scratchrun serve` on a free loopback port, with a key made by its
// own `keys create` in a fresh database, in this test run's state
// directory and cgroup parent; it returns the server's URL and the key.
// At the test's end serve gets SIGTERM and must exit within a minute (it
// is killed, and the test fails, if not).
func startServe(t *testing.T) (url, key string) {
	t.Helper()
	bin := filepath.Join(hostBinaries(t), "scratchrun")
	db := filepath.Join(t.TempDir(), "keys.db")
	out, err := exec.Command(bin, "keys", "create", "--name", "packaging", "--db", db).Output()
	if err != nil {
		t.Fatalf("keys create: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	key = lines[len(lines)-1]
	if !strings.HasPrefix(key, "sr_") || strings.ContainsAny(key, " \t") {
		t.Fatalf("keys create's last line %q is not a key", key)
	}

	cmd := exec.Command(bin, "serve", "--addr", "127.0.0.1:0", "--db", db)
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
	})
	select {
	case url = <-found:
	case <-exited:
		t.Fatalf("serve exited before it listened:\n%s", logs.String())
	case <-time.After(time.Minute):
		t.Fatalf("serve did not listen within a minute:\n%s", logs.String())
	}
	return url, key
}
