package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// A rescan of the image store that does not end (the aliases' reader
// stuck) does not hold up the expiry of silent callers: the run of a
// caller that never beats is killed after CallerLost all the same, and
// the worker keeps heartbeating with the aliases it last read.
func TestSlowAliasRescanDoesNotDelayExpiry(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	eng := newEngine("bash")
	eng.Respond(func(context.Context, execapitest.Call) execapitest.Response {
		return execapitest.Response{Release: make(chan struct{})} // until killed
	})
	stuck := make(chan struct{})
	defer close(stuck)
	var once sync.Once
	rescanning := make(chan struct{})
	var armed atomic.Bool // the reads of Start answer
	aliases := func() map[string]string {
		if armed.Load() {
			once.Do(func() { close(rescanning) })
			<-stuck
		}
		return map[string]string{"sh": "bash"}
	}
	startWorker(t, ns.URLs(), "w1", eng, func(c *worker.Config) { c.Aliases = aliases })
	armed.Store(true)
	<-rescanning

	// A caller that offers, sends the go, and then falls silent.
	startScriptedCall(t, ns.URLs(), "silent front end", 30000)
	waitFor(t, "the silent caller's run to be killed", func() bool {
		calls := eng.Calls()
		return len(calls) == 1 && errors.Is(calls[0].Err, context.Canceled)
	})
	// The registration went on meanwhile, with the aliases read at Start.
	kvWatch := connect(t, ns.URLs(), "registry reader")
	regs, err := kvWatch.SubscribeSync(cluster.RegistrySubject("w1"))
	if err != nil {
		t.Fatal(err)
	}
	var reg cluster.Registration
	if err := json.Unmarshal(next(t, regs).Data, &reg); err != nil || reg.Aliases["sh"] != "bash" {
		t.Errorf("registration during the rescan: %+v, %v", reg, err)
	}
}
