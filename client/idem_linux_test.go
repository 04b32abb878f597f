//go:build linux

package client_test

import (
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/client"
)

// uuidCode prints a random id the sandbox makes, so that two runs print
// two ids: a retry that prints the first id got the first run's answer.
const uuidCode = "import uuid, time, sys\nprint(uuid.uuid4(), flush=True)\ntime.sleep(2)\nprint('done', flush=True)\n"

var uuidLine = regexp.MustCompile(`^[0-9a-f-]{36}\n`)

// A call with an Idempotency-Key whose connection is cut after the request
// went out is retried with the key, and gets the first run's answer: the
// code ran once (one usage row, one id printed), whether the answer is
// JSON (cut at its end) or a stream (cut at its start, while the code
// runs: the retry waits for the run and gets its events).
func TestIdempotentRetryAfterADroppedConnection(t *testing.T) {
	s := newServer(t)
	keys := map[string]string{"run": s.key(t, "client-idem-run"), "stream": s.key(t, "client-idem-stream"), "nokey": s.key(t, "client-idem-nokey")}
	s.start(t)
	ctx := context.Background()
	req := client.Request{Runtime: "python3.13", Code: uuidCode}

	t.Run("run", func(t *testing.T) {
		p := startDropProxy(t, s.url)
		log := &statusLog{}
		c := client.New(p.url, keys["run"], client.WithAutoIdempotency(), client.WithHTTPClient(&http.Client{Transport: log}))
		res, err := c.Run(ctx, req)
		if err != nil || !uuidLine.MatchString(res.Stdout) || !strings.HasSuffix(res.Stdout, "done\n") {
			t.Fatalf("Run = %+v, %v", res, err)
		}
		if p.connections() < 2 || !log.replayed() {
			t.Errorf("%d connections, replayed %v: the answer was not the retry's replay", p.connections(), log.replayed())
		}
		waitRows(t, s, "client-idem-run", 1)
	})
	t.Run("stream", func(t *testing.T) {
		p := startDropProxy(t, s.url)
		log := &statusLog{}
		c := client.New(p.url, keys["stream"], client.WithHTTPClient(&http.Client{Transport: log}))
		var kinds []string
		var stdout string
		var res *client.Result
		for ev, err := range c.Stream(ctx, req, client.WithIdempotencyKey("client-test-stream-1")) {
			if err != nil {
				t.Fatalf("stream: %v after %q", err, kinds)
			}
			kinds = append(kinds, string(ev.Kind))
			switch ev.Kind {
			case client.EventStdout:
				stdout += ev.Text
			case client.EventResult:
				res = ev.Result
			}
		}
		if res == nil || res.Stdout != stdout || !uuidLine.MatchString(stdout) || kinds[0] != "started" || kinds[len(kinds)-1] != "result" {
			t.Fatalf("events %q, stdout %q, result %+v", kinds, stdout, res)
		}
		if p.connections() < 2 || !log.replayed() {
			t.Errorf("%d connections, replayed %v", p.connections(), log.replayed())
		}
		waitRows(t, s, "client-idem-stream", 1)
	})
	// Without a key the cut is the call's error, not retried: whether the
	// code ran is not known.
	t.Run("no key", func(t *testing.T) {
		p := startDropProxy(t, s.url)
		_, err := client.New(p.url, keys["nokey"]).Run(ctx, req)
		if !errors.Is(err, client.ErrConnectionLost) || p.connections() != 1 {
			t.Errorf("Run = %v after %d connections", err, p.connections())
		}
	})
}

// waitRows waits until the key named name has n usage rows (they are
// written as the run ends), and checks no more come.
func waitRows(t *testing.T, s *server, name string, n int) {
	t.Helper()
	var rows []string
	waitFor(t, "usage rows", func() bool {
		rows = s.usageRows(t, name)
		return len(rows) >= n
	})
	if len(rows) != n {
		t.Errorf("usage rows of %s: %q, want %d", name, rows, n)
	}
}

// In order: started first, then the chunks as written (stdout and stderr
// interleaved as the code wrote them), the first while the code still
// runs (it sleeps to its timeout, seconds later), and the result last with the chunks as its output.
func TestStreamAgainstServe(t *testing.T) {
	s := newServer(t)
	key := s.key(t, "client-stream")
	s.start(t)
	ctx := context.Background()
	c := client.New(s.url, key)
	code := "import sys, time\nprint('a', flush=True)\ntime.sleep(0.5)\nprint('b', file=sys.stderr, flush=True)\ntime.sleep(0.5)\nprint('c', flush=True)\ntime.sleep(60)\n"
	var got []string
	var res *client.Result
	running := false
	for ev, err := range c.Stream(ctx, client.Request{Runtime: "python3.13", Code: code, Limits: client.Limits{TimeoutMS: 4000}}) {
		if err != nil {
			t.Fatalf("stream: %v after %q", err, got)
		}
		switch ev.Kind {
		case client.EventStdout, client.EventStderr:
			// Chunks are as the code's writes made them (Python writes
			// "b" and its newline to stderr apart): compare runs of a
			// stream, joined.
			if n := len(got) - 1; n >= 0 && strings.HasPrefix(got[n], string(ev.Kind)+" ") {
				got[n] += ev.Text
				continue
			}
			got = append(got, string(ev.Kind)+" "+ev.Text)
			if len(got) == 2 {
				// The run sleeps until its timeout, seconds away: it
				// must still be in flight.
				info, err := c.Runtimes(ctx)
				running = err == nil && info.Admission != nil && info.Admission.Running > 0
			}
		case client.EventResult:
			got = append(got, "result")
			res = ev.Result
		default:
			got = append(got, string(ev.Kind))
		}
	}
	want := "started|stdout a\n|stderr b\n|stdout c\n|result"
	if strings.Join(got, "|") != want || res == nil || res.Stdout != "a\nc\n" || res.Stderr != "b\n" || res.ExitCode != client.ExitTimeout {
		t.Errorf("events %q, result %+v\nwant %q", got, res, want)
	}
	if !running {
		t.Error("the first chunk came after the run ended: output was not streamed")
	}
}
