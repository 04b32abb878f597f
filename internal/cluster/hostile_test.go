package cluster_test

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// hostileWorker speaks the protocol by hand over real NATS, as a worker
// host that was taken over could: it registers, answers offers "ready",
// keeps each call alive by answering its beats, and on each go does what
// the test scripts.
type hostileWorker struct {
	nc       *nats.Conn
	id       string
	instance string
}

// startHostileWorker registers id (offering runtime, with the caps of
// execapitest's engine) and serves its calls with onGo, run once per call.
func startHostileWorker(t *testing.T, urls []string, id, runtime string, onGo func(h *hostileWorker, reply string)) *hostileWorker {
	t.Helper()
	h := &hostileWorker{nc: connect(t, urls, "hostile "+id), id: id, instance: "hostile-" + id}
	gone := map[string]bool{}
	var mu sync.Mutex
	_, err := h.nc.Subscribe(cluster.WorkerCalls(id), func(m *nats.Msg) {
		call := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
		switch cluster.KindOf(m) {
		case cluster.KindOffer:
			h.send(m.Reply, cluster.KindReady, 0, nil, nil)
		case cluster.KindGo:
			mu.Lock()
			first := !gone[call]
			gone[call] = true
			mu.Unlock()
			if first {
				go onGo(h, m.Reply)
			}
		case cluster.KindBeat:
			h.send(m.Reply, cluster.KindBeat, 0, nil, func(b *nats.Msg) { b.Header.Set(cluster.HeaderState, cluster.StateRunning) })
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	h.nc.Flush()
	reg, _ := json.Marshal(cluster.Registration{ID: id, Instance: h.instance, Info: execapi.Info{Runtimes: []execapi.RuntimeInfo{{Name: runtime}},
		OutputLimitBytes: 1 << 20, MaxReturnBytes: 10 << 20, Admission: &execapi.AdmissionInfo{Free: 8, Capacity: 8}}})
	stop := make(chan struct{})
	done := make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		for {
			h.nc.Publish(cluster.RegistrySubject(id), reg)
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return h
}

// send publishes a frame of a call to reply: numbered when seq > 0.
func (h *hostileWorker) send(reply string, kind cluster.Kind, seq int, body []byte, set func(*nats.Msg)) {
	m := cluster.NewFrame(reply, "", kind, body)
	m.Header.Set(cluster.HeaderInstance, h.instance)
	if seq > 0 {
		cluster.SetInt(m, cluster.HeaderSeq, seq)
	}
	if set != nil {
		set(m)
	}
	h.nc.PublishMsg(m)
}

// malformedLoss checks that err is a call lost with worker id for a
// malformed answer.
func malformedLoss(t *testing.T, what string, err error, id string) {
	t.Helper()
	var lost *execapi.WorkerLostError
	if !errors.As(err, &lost) || lost.Worker != id || !strings.Contains(lost.Why, "malformed") {
		t.Fatalf("%s: %v, want the call lost with %s for a malformed answer", what, err, id)
	}
}

// One frame from a worker must not kill a front end: a result announcing
// 2^31 parts ends that call (as lost with a malformed answer), again on
// the next call placed there, and the front end goes on serving calls on
// other workers. Nothing is sized by the announced count.
func TestHostileResultPartCountEndsOnlyItsCall(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{MaxPayload: 1 << 20})
	startHostileWorker(t, ns.URLs(), "w-hostile", "bash", func(h *hostileWorker, reply string) {
		h.send(reply, cluster.KindResult, 1, []byte(`{"exit_code":0`), func(m *nats.Msg) {
			cluster.SetInt(m, cluster.HeaderPart, 0)
			cluster.SetInt(m, cluster.HeaderParts, 1<<31)
		})
	})
	startWorker(t, ns.URLs(), "w-honest", newEngine("python3.11"), nil)
	f := startFrontend(t, ns.URLs(), nil)
	waitWorkers(t, f, "w-honest", "w-hostile")
	for i := 0; i < 2; i++ {
		_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		malformedLoss(t, "a result of 2^31 parts", err, "w-hostile")
	}
	if res, on, err := exec(f, execapi.Request{Runtime: "python3.11", Code: "x"}, nil); err != nil || on != "w-honest" || res.Outcome != execapi.OutcomeSuccess {
		t.Fatalf("a call on the honest worker after the attack: on %q, %v %+v", on, err, res)
	}
	if now, peak := f.Held(); now != 0 || peak > 4<<20 {
		t.Errorf("the front end holds %d bytes of answers after the calls (at most %d at once)", now, peak)
	}
}

// Frames held back out of order never become contiguous: a worker that
// sends 300 frames of 900 KiB after a frame it never sends (268 MiB) makes
// the front end hold no more than the call's own bound (its result's
// limit from the worker's caps, twice, and a frame or two), and ends the
// call as malformed while the worker still answers its beats.
func TestHostileOutOfOrderFramesAreBounded(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{MaxPayload: 1 << 20})
	sent := make(chan int, 1)
	startHostileWorker(t, ns.URLs(), "w-hostile", "bash", func(h *hostileWorker, reply string) {
		body := make([]byte, 900<<10)
		n := 0
		for seq := 2; seq < 302; seq++ {
			h.send(reply, cluster.KindEvents, seq, body, nil)
			n += len(body)
		}
		h.nc.Flush()
		sent <- n
	})
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) {
		// Only the bound may end the call: the worker answers every beat.
		c.Timing.LostAfter, c.Timing.GoneAfter = time.Minute, time.Minute
	})
	waitWorkers(t, f, "w-hostile")
	done := make(chan error, 1)
	go func() {
		_, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil)
		done <- err
	}()
	select {
	case err := <-done:
		malformedLoss(t, "frames out of order without end", err, "w-hostile")
	case <-time.After(30 * time.Second):
		t.Fatal("the call still waits 30 s into the flood of frames out of order")
	}
	// The worker's caps: 1 MiB of output each way, escaped at worst, no
	// return files asked for; the bound is that twice, and two frames.
	resultLimit := int64(2*6*(1<<20) + 64<<10)
	bound := 2*resultLimit + 2*(1<<20+4<<10)
	if attack := <-sent; int64(attack) < 10*bound {
		t.Fatalf("the attack sent %d bytes, not enough to show a bound of %d", attack, bound)
	}
	_, peak := f.Held()
	if peak > bound {
		t.Errorf("the front end held %d bytes of one call's answers at once, beyond its bound of %d", peak, bound)
	}
	waitFor(t, "the front end to hold nothing", func() bool { now, _ := f.Held(); return now == 0 })
}
