package cluster_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A result and a request far larger than the servers' largest message (1
// MiB here) arrive whole: 12 MiB of return files and a megabyte of output
// back, 6 MiB of input files there.
func TestLargeRequestsAndResultsArriveWhole(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{MaxPayload: 1 << 20})
	eng := newEngine("bash")
	big := bytes.Repeat([]byte("0123456789abcdef"), 12<<20/16)
	input := bytes.Repeat([]byte{0xfe, 0x01, 0x7f}, 2<<20)
	eng.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		if len(c.Checked.Files) != 1 || !bytes.Equal(c.Checked.Files[0].Data, input) {
			return execapitest.Response{Err: errors.New("the input file did not arrive whole")}
		}
		r := execapitest.Success(strings.Repeat("x", 1<<20))
		r.Files = map[string]string{"/tmp/big.bin": base64.StdEncoding.EncodeToString(big)}
		return execapitest.Response{Result: r}
	})
	startWorker(t, ns.URLs(), "w1", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w1")
	// It asks for the file back, as a call must for a worker to return
	// one: the front end holds a result to what its request allows.
	req := execapi.Request{Runtime: "bash", Code: "x", FilesBase64: map[string]string{"/tmp/in.bin": base64.StdEncoding.EncodeToString(input)},
		ReturnFiles: []string{"/tmp/big.bin"}}
	res, _, err := exec(f, req, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := base64.StdEncoding.DecodeString(res.Files["/tmp/big.bin"])
	if !bytes.Equal(got, big) || len(res.Stdout) != 1<<20 {
		t.Errorf("returned %d of %d bytes, stdout %d", len(got), len(big), len(res.Stdout))
	}
}

// Events reach the caller as the run goes, in order: admitted and
// started, then the output in the chunks the engine gave.
func TestEventsStreamAcrossTheHop(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	release := make(chan struct{})
	eng.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Result: execapitest.Success("one\ntwo\n"), Release: release,
			Events: []execapi.Event{{Kind: execapi.EventStdout, Data: []byte("one\n")}, {Kind: execapi.EventStderr, Data: []byte("warn\n")},
				{Kind: execapi.EventStdout, Data: []byte("two\n")}}}
	})
	startWorker(t, ns.URLs(), "w1", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w1")
	var mu sync.Mutex
	var got []string
	sink := func(ev execapi.Event) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, string(ev.Kind)+":"+string(ev.Data))
	}
	done := make(chan error, 1)
	go func() {
		_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, sink)
		done <- err
	}()
	want := "started:,stdout:one\n,stderr:warn\n,stdout:two\n"
	waitFor(t, "the events before the result", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(got, ",") == want
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// A caller that cancels ends the run on its worker at once; a caller
// that vanishes (its connection gone, no cancel sent) ends it once its
// beats stop.
func TestCancelAndVanishedCallerEndTheRun(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	hold := make(chan struct{})
	defer close(hold)
	eng.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Release: hold}
	})
	w, _ := startWorker(t, ns.URLs(), "w1", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := f.Exec(ctx, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		done <- err
	}()
	waitFor(t, "the run", func() bool { return eng.InFlight() == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled call: %v", err)
	}
	waitFor(t, "the run to end on cancel", func() bool { return eng.InFlight() == 0 })
	waitFor(t, "the worker to forget it", func() bool { return w.InFlight() == 0 })

	// Now a front end whose connection dies mid-run.
	vanishing, conn := startFrontendConn(t, ns.URLs(), nil)
	waitWorkers(t, vanishing, "w1")
	go exec(vanishing, execapi.Request{Runtime: "bash", Code: "x"}, nil)
	waitFor(t, "the second run", func() bool { return eng.InFlight() == 1 })
	conn.Close()
	start := time.Now()
	waitFor(t, "the run to end once its caller fell silent", func() bool { return eng.InFlight() == 0 })
	if took := time.Since(start); took > 5*fastWorker.CallerLost {
		t.Errorf("the run outlived its silent caller by %s", took)
	}
	calls := eng.Calls()
	if len(calls) != 2 || !errors.Is(calls[0].Err, context.Canceled) || !errors.Is(calls[1].Err, context.Canceled) {
		t.Errorf("calls %+v: both runs should have been cancelled", calls)
	}
}

// The worker a call ran on comes back with the call, whichever way it
// ended there: on its result, on the error of a run that failed on the
// worker and of a call whose caller went away (which unwraps to the
// context's error), so that accounting reads it from what Exec returned.
// A call no worker took names none.
func TestTheWorkerComesBackWithTheCall(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	eng.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		switch c.Checked.Code {
		case "fail":
			return execapitest.Response{Err: errors.New("boom")}
		case "hold":
			return execapitest.Response{Release: make(chan struct{})}
		}
		return execapitest.Response{Result: execapitest.Success("")}
	})
	startWorker(t, ns.URLs(), "w1", eng, nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w1")

	if _, on, err := exec(f, execapi.Request{Runtime: "bash", Code: "ok"}, nil); err != nil || on != "w1" {
		t.Errorf("a run that succeeded: on %q, %v", on, err)
	}
	if _, on, err := exec(f, execapi.Request{Runtime: "bash", Code: "fail"}, nil); err == nil || on != "w1" ||
		err.Error() != "the run on worker w1 failed: boom" {
		t.Errorf("a run that failed on the worker: on %q, %v", on, err)
	}
	ctx, cancel := context.WithCancel(execapi.WithCaller(context.Background(), "key_test"))
	defer cancel()
	held := make(chan error, 1)
	var heldOn string
	go func() {
		res, err := f.Exec(ctx, execapi.Request{Runtime: "bash", Code: "hold"}, nil)
		heldOn = execapi.WorkerOf(res, err)
		held <- err
	}()
	waitFor(t, "the held run", func() bool { return eng.InFlight() == 1 })
	cancel()
	if err := <-held; !errors.Is(err, context.Canceled) || heldOn != "w1" {
		t.Errorf("a call whose caller went away: on %q, %v", heldOn, err)
	}
	if _, on, err := exec(f, execapi.Request{Runtime: "cobol", Code: "x"}, nil); err == nil || on != "" {
		t.Errorf("a call no worker offers: on %q, %v", on, err)
	}
}
