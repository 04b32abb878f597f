package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/postgres"
)

// Sessions through a real cluster (one front end, two workers, with
// --sessions), in one cluster for every check: a session keeps its state
// across calls on its worker; kill -9 of that worker makes its next call
// "lost with its worker" (never a new session) and its restart leaves
// nothing of it; SIGTERM of the other worker ends its session with notice
// to the next call.
func TestClusterSessions(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	postgres.Shared(t)
	before := snapshot()
	c := startClusterOf(t, clusterShape{workers: 2, fronts: 1, sessions: true})
	_, key := c.key("sessions", 1_000_000, 64)
	fe := c.fronts[0].url

	// One session on each worker: open until both hold one (placement
	// picks among them), closing the extra ones.
	held := map[string]string{} // worker id -> session id
	for i := 0; len(held) < 2; i++ {
		if i == 16 {
			t.Fatalf("16 sessions opened, on %v only:\n%s", held, c.logs())
		}
		a := sessionCall(http.MethodPost, fe+"/v1/sessions", key, `{"runtime": "python3.13"}`)
		if a.status != http.StatusCreated {
			t.Fatalf("open a session: %d %s\n%s", a.status, a.body, c.logs())
		}
		var info execapi.SessionInfo
		if err := json.Unmarshal([]byte(a.body), &info); err != nil {
			t.Fatal(err)
		}
		w := sessionWorker(t, c, info.ID)
		if _, ok := held[w]; ok {
			if a := sessionCall(http.MethodDelete, fe+"/v1/sessions/"+info.ID, key, ""); a.status != http.StatusOK {
				t.Fatalf("close an extra session: %d %s", a.status, a.body)
			}
			continue
		}
		held[w] = info.ID
	}
	victim, drained := c.workers[0], c.workers[1]
	lostID, endedID := held[victim.id], held[drained.id]

	// State kept across calls, and files, on the worker that holds it.
	exec := func(id, code string) answer {
		body, _ := json.Marshal(map[string]string{"code": code})
		return sessionCall(http.MethodPost, fe+"/v1/sessions/"+id+"/exec", key, string(body))
	}
	if a := exec(lostID, "x = 41\ndef f(): return x + 1"); a.status != http.StatusOK {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	if a := exec(lostID, "print(f())"); a.status != http.StatusOK || !strings.Contains(a.body, `"stdout":"42\n"`) {
		t.Fatalf("second call (the variable and the function kept): %d %s", a.status, a.body)
	}
	if a := sessionCall(http.MethodPut, fe+"/v1/sessions/"+lostID+"/files/tmp/note.txt", key, "kept"); a.status/100 != 2 {
		t.Fatalf("write a file: %d %s", a.status, a.body)
	}
	if a := exec(lostID, "print(open('/tmp/note.txt').read())"); a.status != http.StatusOK || !strings.Contains(a.body, `"stdout":"kept\n"`) {
		t.Errorf("the code reads the file written: %d %s", a.status, a.body)
	}
	if a := sessionCall(http.MethodGet, fe+"/v1/sessions/"+lostID+"/files/tmp/note.txt", key, ""); a.status != http.StatusOK || a.body != "kept" {
		t.Errorf("read the file: %d %q", a.status, a.body)
	}

	// kill -9 of the session's worker: lost, never a new session.
	others := drained.sandboxes()
	victim.cmd.Process.Signal(syscall.SIGKILL)
	victim.wait(t)
	for i := range 2 {
		a := exec(lostID, "print(x)")
		// Until the registry drops the dead worker, the front end cannot
		// tell it from a slow one: it says so (503, retry) and nothing
		// runs; a caller retries as told.
		for deadline := time.Now().Add(15 * time.Second); i == 0 && a.status == http.StatusServiceUnavailable &&
			strings.Contains(a.body, execapi.CodeSessionWorkerUnanswered) && time.Now().Before(deadline); {
			time.Sleep(500 * time.Millisecond)
			a = exec(lostID, "print(x)")
		}
		if a.status != http.StatusBadGateway || !strings.Contains(a.body, execapi.CodeSessionLost) ||
			!strings.Contains(a.body, "the session was lost with its worker") {
			t.Errorf("call %d after its worker's kill -9: %d %s", i+1, a.status, a.body)
		}
	}
	if got := drained.sandboxes(); got != others {
		t.Errorf("%s went from %d to %d sandboxes: the lost session was opened again", drained.id, others, got)
	}
	if row, err := c.keys.CodeSession(context.Background(), store.HashSessionID(lostID)); err != nil || row.Open() {
		t.Errorf("the lost session's row: %+v, %v; want it ended", row, err)
	}
	// Restarted on its state directory and cgroup parent, the worker
	// sweeps what its killed self left.
	c.workers[0] = c.startWorker(0)
	if left := sandboxGroupsLeft(victim.level); len(left) > 0 {
		t.Errorf("left by the killed %s after its restart: %v", victim.id, left)
	}
	c.waitWorkers(2)

	// SIGTERM of the other worker: its session ends, and its next call
	// is told why.
	if a := exec(endedID, "y = 1"); a.status != http.StatusOK {
		t.Fatalf("a call before the drain: %d %s", a.status, a.body)
	}
	drained.cmd.Process.Signal(syscall.SIGTERM)
	if code := drained.wait(t); code != 0 {
		t.Errorf("%s exited %d after SIGTERM:\n%s", drained.id, code, drained.stderr())
	}
	a := exec(endedID, "print(y)")
	if a.status != http.StatusGone || !strings.Contains(a.body, execapi.CodeSessionEnded) ||
		!strings.Contains(a.body, "the server that held it shut down") {
		t.Errorf("a call after its worker drained: %d %s", a.status, a.body)
	}
	if left := sandboxGroupsLeft(drained.level); len(left) > 0 {
		t.Errorf("left by the drained %s: %v", drained.id, left)
	}
	c.stopAll(t)
	c.checkClean(t, before)
	if t.Failed() {
		t.Logf("logs:\n%s", c.logs())
	}
}

// sessionWorker is the worker id the shared store's row names for a
// session.
func sessionWorker(t *testing.T, c *testCluster, id string) string {
	t.Helper()
	row, err := c.keys.CodeSession(context.Background(), store.HashSessionID(id))
	if err != nil {
		t.Fatalf("the session's row: %v", err)
	}
	w, _ := cluster.ParseSessionWorker(row.Worker)
	if w == "" {
		t.Fatalf("the session's row names no worker: %+v", row)
	}
	return w
}

// sessionCall sends one session request to a front end: body JSON, or a
// file's bytes for a PUT.
func sessionCall(method, url, key, body string) answer {
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if method == http.MethodPut {
		req.Header.Set("Content-Type", "application/octet-stream")
	} else if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := clusterClient.Do(req)
	if err != nil {
		return answer{status: -1, body: err.Error()}
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, body: string(data)}
}
