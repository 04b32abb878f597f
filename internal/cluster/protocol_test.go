package cluster_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// Frames lost on the way (with a NATS node that died) are not lost with
// the call. These tests script one side of the protocol by hand over a
// real server, to lose exactly the frame they mean to.

// A front end that did not get a frame acknowledges only what it has; the
// worker sends the rest again, with the same numbers.
func TestWorkerSendsUnacknowledgedFramesAgain(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	startWorker(t, ns.URLs(), "w1", eng, nil)
	nc, answers, subject, reply := startScriptedCall(t, ns.URLs(), "scripted front end", 5000)
	// The run's frames: events (started), then the result. Drop them all.
	var last *nats.Msg
	for last == nil || cluster.KindOf(last) != cluster.KindResult {
		last = next(t, answers)
	}
	lastSeq := cluster.Int(last, cluster.HeaderSeq)
	// Acknowledge none: every frame comes again, in order, same numbers.
	beat := cluster.NewFrame(subject, reply, cluster.KindBeat, nil)
	cluster.SetInt(beat, cluster.HeaderAck, 0)
	time.Sleep(2 * fastWorker.Resend)
	nc.PublishMsg(beat)
	var seqs []int
	for len(seqs) < lastSeq+1 {
		m := next(t, answers)
		if cluster.KindOf(m) == cluster.KindBeat {
			if cluster.Int(m, cluster.HeaderLast) != lastSeq || m.Header.Get(cluster.HeaderState) != cluster.StateFinished {
				t.Errorf("beat: last %d state %q", cluster.Int(m, cluster.HeaderLast), m.Header.Get(cluster.HeaderState))
			}
			seqs = append(seqs, 0)
			continue
		}
		seqs = append(seqs, cluster.Int(m, cluster.HeaderSeq))
		if cluster.KindOf(m) == cluster.KindResult {
			var res execapi.Result
			if err := json.Unmarshal(m.Data, &res); err != nil || res.Outcome != execapi.OutcomeSuccess {
				t.Errorf("the result sent again: %v %+v", err, res)
			}
		}
	}
	// The frames come again first, then the beat's answer.
	for i, seq := range seqs {
		if want := (i + 1) % (lastSeq + 1); seq != want {
			t.Errorf("frames sent again: %v (0 the beat), want 1..%d then the beat", seqs, lastSeq)
			break
		}
	}
	// Once acknowledged and done, the worker forgets the call.
	ack := cluster.NewFrame(subject, reply, cluster.KindBeat, nil)
	cluster.SetInt(ack, cluster.HeaderAck, lastSeq)
	nc.PublishMsg(ack)
	nc.PublishMsg(cluster.NewFrame(subject, reply, cluster.KindDone, nil))
	nc.PublishMsg(cluster.NewFrame(subject, reply, cluster.KindBeat, nil))
	for {
		m := next(t, answers)
		if cluster.KindOf(m) == cluster.KindUnknown {
			break
		}
	}
	if n := len(eng.Calls()); n != 1 {
		t.Errorf("the engine ran %d calls, want 1", n)
	}
}

// A worker that did not get the go (or a part) says so in its beat, and
// the front end sends them again; frames that come out of order are put
// back in order before the caller sees them.
func TestFrontendSendsLostGoAgainAndOrdersFrames(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	nc := connect(t, ns.URLs(), "scripted worker")
	calls, err := nc.SubscribeSync(cluster.WorkerCalls("w1"))
	if err != nil {
		t.Fatal(err)
	}
	nc.Flush()
	reg, _ := json.Marshal(cluster.Registration{ID: "w1", Instance: "i1", Info: execapi.Info{Runtimes: []execapi.RuntimeInfo{{Name: "bash"}}, Admission: &execapi.AdmissionInfo{Free: 4}}})
	stopBeats := make(chan struct{})
	defer close(stopBeats)
	go func() {
		for {
			nc.Publish(cluster.RegistrySubject("w1"), reg)
			select {
			case <-stopBeats:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w1")
	var events []string
	done := make(chan error, 1)
	var res execapi.Result
	go func() {
		var err error
		res, _, err = exec(f, execapi.Request{Runtime: "bash", Code: "x"}, func(ev execapi.Event) { events = append(events, string(ev.Data)) })
		done <- err
	}()
	answer := func(to *nats.Msg, kind cluster.Kind, seq int, body []byte, set func(*nats.Msg)) {
		m := cluster.NewFrame(to.Reply, "", kind, body)
		m.Header.Set(cluster.HeaderInstance, "i1")
		if seq > 0 {
			cluster.SetInt(m, cluster.HeaderSeq, seq)
		}
		if set != nil {
			set(m)
		}
		nc.PublishMsg(m)
	}
	offer := next(t, calls)
	if cluster.KindOf(offer) != cluster.KindOffer {
		t.Fatalf("first frame %q", cluster.KindOf(offer))
	}
	answer(offer, cluster.KindReady, 0, nil, nil)
	if m := next(t, calls); cluster.KindOf(m) != cluster.KindGo {
		t.Fatalf("after ready: %q", cluster.KindOf(m))
	}
	// "Lose" the go: the front end's beat hears that the call waits.
	var beat *nats.Msg
	for beat == nil {
		if m := next(t, calls); cluster.KindOf(m) == cluster.KindBeat {
			beat = m
		}
	}
	answer(beat, cluster.KindBeat, 0, nil, func(m *nats.Msg) { m.Header.Set(cluster.HeaderState, cluster.StateWaiting) })
	var again *nats.Msg
	for again == nil {
		if m := next(t, calls); cluster.KindOf(m) == cluster.KindGo {
			again = m
		}
	}
	// The run's frames, out of order: the result (2) before the output (1).
	out, _ := json.Marshal([]cluster.WireEvent{{Kind: execapi.EventStdout, Data: []byte("hi\n")}})
	result, _ := json.Marshal(execapitest.Success("hi\n"))
	answer(again, cluster.KindResult, 2, result, func(m *nats.Msg) {
		cluster.SetInt(m, cluster.HeaderPart, 0)
		cluster.SetInt(m, cluster.HeaderParts, 1)
	})
	time.Sleep(50 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("the call ended (%v) before its first frame came", err)
	default:
	}
	answer(again, cluster.KindEvents, 1, out, nil)
	if err := <-done; err != nil || res.Stdout != "hi\n" || len(events) != 1 || events[0] != "hi\n" {
		t.Fatalf("result %+v, events %q, %v", res, events, err)
	}
	for {
		if m := next(t, calls); cluster.KindOf(m) == cluster.KindDone {
			break
		}
	}
}

// next is the next message on sub; the bound only catches hangs.
func next(t *testing.T, sub *nats.Subscription) *nats.Msg {
	t.Helper()
	m, err := sub.NextMsgWithContext(timeoutCtx(t, 10*time.Second))
	if err != nil {
		t.Fatalf("waiting for a frame: %v", err)
	}
	return m
}

func timeoutCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
