//go:build linux

package client_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/client"
)

// chart is the README's chart example: numpy and matplotlib, saved as PNG.
const chart = `import numpy as np
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
x = np.linspace(0, 2 * np.pi, 100)
plt.plot(x, np.sin(x))
plt.savefig("/tmp/chart.png")
print("saved")
`

// The client against a real server: output, a returned PNG as bytes,
// binary input files, the limits' exit codes, an invalid field named, and
// a key the server does not know.
func TestRunAgainstServe(t *testing.T) {
	s := newServer(t)
	key := s.key(t, "client-run")
	s.start(t)
	c := client.New(s.url, key)
	ctx := context.Background()

	t.Run("print", func(t *testing.T) {
		res, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: `print("hello from the sandbox")`})
		if err != nil || res.ExitCode != 0 || res.Stdout != "hello from the sandbox\n" || res.Outcome != client.OutcomeSuccess || !res.StatePurged {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("png", func(t *testing.T) {
		res, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: chart, ReturnFiles: []string{"/tmp/chart.png"}})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		png := res.Files["/tmp/chart.png"]
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) || len(png) < 1000 {
			t.Fatalf("returned %d bytes, not a PNG: %q", len(png), png[:min(len(png), 16)])
		}
		dest := filepath.Join(t.TempDir(), "chart.png")
		if err := res.Save("/tmp/chart.png", dest); err != nil {
			t.Fatal(err)
		}
		if saved, _ := os.ReadFile(dest); !bytes.Equal(saved, png) {
			t.Error("the saved file is not the returned one")
		}
	})
	t.Run("binary input", func(t *testing.T) {
		in := make([]byte, 4096)
		for i := range in {
			in[i] = byte(i * 7)
		}
		sum := sha256.Sum256(in)
		res, err := c.Run(ctx, client.Request{Runtime: "python3.13",
			Code:        "import hashlib\nprint(hashlib.sha256(open('/tmp/in.bin','rb').read()).hexdigest())",
			FilesBase64: map[string]string{"/tmp/in.bin": base64.StdEncoding.EncodeToString(in)}})
		if err != nil || strings.TrimSpace(res.Stdout) != hex.EncodeToString(sum[:]) {
			t.Errorf("Run = %+v, %v; want the digest %x", res, err, sum)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		res, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: "import time\ntime.sleep(60)", Limits: client.Limits{TimeoutMS: 1000}})
		if err != nil || res.ExitCode != client.ExitTimeout || res.Outcome != client.OutcomeTimeout || !res.Facts.TimedOut {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("memory", func(t *testing.T) {
		res, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: "x = bytearray(1 << 30)\nprint(len(x))", Limits: client.Limits{MemoryMB: 64}})
		if err != nil || res.ExitCode != client.ExitKilled || res.Outcome != client.OutcomeMemoryLimit || !res.Facts.MemoryLimitHit {
			t.Errorf("Run = %+v, %v", res, err)
		}
	})
	t.Run("invalid field", func(t *testing.T) {
		_, err := c.Run(ctx, client.Request{Runtime: "python3.13", Code: "print(1)", Limits: client.Limits{TimeoutMS: 99_999_999}})
		var ae *client.APIError
		if !errors.As(err, &ae) || ae.Status != 400 || ae.Code != client.CodeInvalidRequest || ae.Field != "limits.timeout_ms" ||
			!errors.Is(err, client.ErrInvalidRequest) || !strings.Contains(err.Error(), "limits.timeout_ms") {
			t.Errorf("invalid timeout: %v (%+v)", err, ae)
		}
	})
	t.Run("401", func(t *testing.T) {
		_, err := client.New(s.url, "sr_live_0000000000000000000000000000000000000000000").Run(ctx, client.Request{Runtime: "python3.13", Code: "print(1)"})
		var ae *client.APIError
		if !errors.Is(err, client.ErrUnauthorized) || !errors.As(err, &ae) || ae.Code != client.CodeUnauthorized || errors.Is(err, client.ErrRefused) {
			t.Errorf("unknown key: %v", err)
		}
		if _, err := client.New(s.url, "").Runtimes(ctx); !errors.Is(err, client.ErrUnauthorized) {
			t.Errorf("Runtimes without a key: %v", err)
		}
	})
}

// statusLog is an http.RoundTripper that records the status of every
// answer to POST /v1/exec, and whether one was a replay.
type statusLog struct {
	mu       sync.Mutex
	statuses []int
	replay   bool
}

func (l *statusLog) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == http.MethodPost {
		l.mu.Lock()
		l.statuses = append(l.statuses, resp.StatusCode)
		l.replay = l.replay || resp.Header.Get("Idempotency-Replayed") == "true"
		l.mu.Unlock()
	}
	return resp, err
}

func (l *statusLog) replayed() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.replay
}

func (l *statusLog) get() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]int(nil), l.statuses...)
}

// waitFor polls cond (a server's state, which sends no event) until it
// holds, for at most a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for range 3000 {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no %s within a minute", what)
}

// A key with one call in flight at a time: a second call while the first
// runs is answered 429 with Retry-After, and the client retries it after
// that until the first has ended and it runs.
func TestRetries429WithRetryAfter(t *testing.T) {
	s := newServer(t)
	key := s.key(t, "client-busy", "--concurrency", "1")
	s.start(t)
	ctx := context.Background()
	first := client.New(s.url, key)
	done := make(chan error, 1)
	go func() {
		res, err := first.Run(ctx, client.Request{Runtime: "python3.13", Code: "import time\ntime.sleep(3)\nprint('first')"})
		if err == nil && res.Stdout != "first\n" {
			err = errors.New("first run's stdout " + res.Stdout)
		}
		done <- err
	}()
	waitFor(t, "first run in flight", func() bool {
		info, err := first.Runtimes(ctx)
		return err == nil && info.Admission != nil && info.Admission.Running > 0
	})
	log := &statusLog{}
	second := client.New(s.url, key, client.WithHTTPClient(&http.Client{Transport: log}), client.WithRetries(30, 2*time.Minute))
	res, err := second.Run(ctx, client.Request{Runtime: "python3.13", Code: "print('second')"})
	statuses := log.get()
	if err != nil || res.Stdout != "second\n" || len(statuses) < 2 || statuses[0] != http.StatusTooManyRequests || statuses[len(statuses)-1] != http.StatusOK {
		t.Errorf("second = %+v, %v; statuses %v, want 429 first and 200 last", res, err, statuses)
	}
	if err := <-done; err != nil {
		t.Errorf("first: %v", err)
	}
}

// The package's examples run as they are written against a real server,
// named by the environment as a user would.
func TestExamplesAgainstServe(t *testing.T) {
	s := newServer(t)
	key := s.key(t, "client-examples")
	s.start(t)
	t.Setenv(client.EnvURL, s.url)
	t.Setenv(client.EnvKey, key)
	t.Chdir(t.TempDir())
	Example()
	if data, err := os.ReadFile("chart.png"); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Errorf("Example saved no chart: %v", err)
	}
	ExampleClient_Stream()
}
