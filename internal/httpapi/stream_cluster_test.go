package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// clusterEngine is a scripted engine for a cluster's worker, always with
// room.
type clusterEngine struct{ *execapitest.Service }

func (clusterEngine) Admission() execapi.AdmissionInfo {
	return execapi.AdmissionInfo{Free: 4, Capacity: 4}
}

// A server whose service is a cluster's front end streams too: a worker's
// output reaches the client while the run is held on the worker, and then
// the result. (Real NATS in this process; the workers' real sandboxes are
// cmd/scratchrun's TestCluster.)
func TestStreamThroughAClusterFrontEnd(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := clusterEngine{execapitest.New("bash")}
	release := make(chan struct{})
	var once sync.Once
	done := func() { once.Do(func() { close(release) }) }
	defer done()
	eng.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		res := execapitest.Success("one\n")
		res.Stderr = "warn\n"
		return execapitest.Response{Result: res, Release: release, Events: []execapi.Event{
			{Kind: execapi.EventStdout, Data: []byte("one\n")}, {Kind: execapi.EventStderr, Data: []byte("warn\n")}}}
	})
	conn := func(name string) *nats.Conn {
		nc, err := cluster.Connect(cluster.ConnOptions{URLs: ns.URLs(), Name: name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		return nc
	}
	w, err := worker.Start(worker.Config{ID: "w1", Conn: conn("w1"), Engine: eng, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := frontend.New(ctx, frontend.Config{Conn: conn("frontend"), Policy: execapi.DefaultPolicy(), Replicas: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	waitFor(t, "the front end to see the worker", func() bool { return len(f.Workers()) == 1 })

	ts := startServer(t, serverOptions{fake: execapitest.New("bash"), wrap: func(*execapitest.Service) execapi.Service { return f }})
	_, key := ts.key("alice", 1000, 4)
	resp, err := ts.streamPost(context.Background(), key, quickBody, "text/event-stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var got []string
	var last sseEvent
	err = readSSE(resp.Body, func(ev sseEvent) bool {
		switch ev.name {
		case "stdout", "stderr":
			got = append(got, ev.name+":"+ev.text(t))
			if ev.name == "stderr" {
				done() // the run ends only once its output has come
			}
		case "":
		default:
			got = append(got, ev.name)
			last = ev
		}
		return true
	})
	if err != nil || resp.StatusCode != http.StatusOK || strings.Join(got, "|") != "started|stdout:one\n|stderr:warn\n|result" {
		t.Fatalf("answer %d, events %q, %v", resp.StatusCode, got, err)
	}
	var res execapi.Result
	if err := json.Unmarshal([]byte(last.data), &res); err != nil || res.Stdout != "one\n" || res.Stderr != "warn\n" {
		t.Errorf("result %s", last.data)
	}
}
