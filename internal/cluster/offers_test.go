package cluster_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A front end that offers without ever sending the go cannot make a
// worker hold without bound: beyond room tied to its capacity (8
// sandboxes here), by count and by the parts the offers announce, offers
// are refused as its queue being full, and a real front end then answers
// with that refusal (a 429) rather than the worker growing.
func TestWorkerBoundsOffersNotStarted(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{MaxPayload: 1 << 20})
	eng := newEngine("bash") // capacity 8
	w, _ := startWorker(t, ns.URLs(), "w1", eng, func(c *worker.Config) {
		c.Timing.GoWait = time.Minute // only the bound may forget an offer
	})
	nc := connect(t, ns.URLs(), "hoarding front end")
	inbox := nats.NewInbox()
	answers, err := nc.SubscribeSync(inbox + ".*")
	if err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 900<<10)
	// offer sends n offers announcing parts parts each (only the first
	// sent) and counts the worker's answers.
	offer := func(prefix string, n, parts int) (ready int) {
		t.Helper()
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s%d", prefix, i)
			m := cluster.NewFrame(cluster.CallSubject("w1", id), inbox+"."+id, cluster.KindOffer, body)
			cluster.SetInt(m, cluster.HeaderParts, parts)
			m.Header.Set(cluster.HeaderRuntime, "bash")
			if err := nc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
		}
		for i := 0; i < n; i++ {
			m := next(t, answers)
			switch cluster.KindOf(m) {
			case cluster.KindReady:
				ready++
			case cluster.KindRefused:
				if f := cluster.DecodeFailure(m.Data); !isRefusal(f.Err("w1"), execapi.RefusedQueueFull) || f.Refusal.RetryAfter <= 0 {
					t.Fatalf("an offer beyond the worker's room refused with %+v, want queue_full with a Retry-After", f)
				}
			default:
				t.Fatalf("answer to an offer: %q", cluster.KindOf(m))
			}
		}
		return ready
	}
	// By bytes: offers announcing 60 parts of up to 1 MiB each.
	if ready := offer("big", 10, 60); ready == 0 || ready > 3 {
		t.Errorf("%d of 10 offers of 60 MiB held; want the few that fit 8 sandboxes' room", ready)
	}
	for i := 0; i < 10; i++ {
		id := fmt.Sprintf("big%d", i)
		nc.PublishMsg(cluster.NewFrame(cluster.CallSubject("w1", id), inbox+"."+id, cluster.KindCancel, nil))
	}
	waitFor(t, "the big offers to be forgotten", func() bool { return w.InFlight() == 0 })
	// By count: 200 offers of 900 KiB (all held before: 2000 were 1.7 GiB).
	ready := offer("small", 200, 1)
	if ready == 0 || ready > 4*8 {
		t.Errorf("%d of 200 offers held; want them bounded by the worker's 8 sandboxes", ready)
	}
	if n := w.InFlight(); n != ready {
		t.Errorf("the worker holds %d calls after %d offers were ready", n, ready)
	}
	// A real front end is refused at once, and says so.
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) { c.QueueWait = -1 })
	waitWorkers(t, f, "w1")
	if _, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "x"}, nil); !isRefusal(err, execapi.RefusedQueueFull) {
		t.Errorf("a call while the worker's room for offers is full: %v, want a queue_full refusal", err)
	}
	if n := len(eng.Calls()); n != 0 {
		t.Errorf("the engine ran %d calls; the offers held had no go, and the front end's call was refused", n)
	}
}
