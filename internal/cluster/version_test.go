package cluster_test

import (
	"context"
	"slices"
	"testing"

	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// Each worker publishes its version in its registration, and the front
// end's description lists the versions its live workers run, each once.
func TestWorkersPublishTheirVersion(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	f := startFrontend(t, ns.URLs(), nil)
	for id, v := range map[string]string{"w-a": "v1.0.0", "w-b": "v1.1.0", "w-c": "v1.1.0"} {
		startWorker(t, ns.URLs(), id, newEngine("bash"), func(c *worker.Config) { c.Version = v })
	}
	waitWorkers(t, f, "w-a", "w-b", "w-c")
	want := map[string]string{"w-a": "v1.0.0", "w-b": "v1.1.0", "w-c": "v1.1.0"}
	for _, w := range f.Workers() {
		if w.Version != want[w.ID] || w.Info.Version != want[w.ID] {
			t.Errorf("%s registered version %q, want %q", w.ID, w.Version, want[w.ID])
		}
	}
	info, err := f.Describe(context.Background())
	if err != nil || !slices.Equal(info.WorkerVersions, []string{"v1.0.0", "v1.1.0"}) || info.Version != "" {
		t.Errorf("described worker versions %q, version %q (%v); want v1.0.0 and v1.1.0, and no version of the front end's own", info.WorkerVersions, info.Version, err)
	}
}
