package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// engineOnlyFlags are serve's flags that shape a local engine: a
// cluster's front end has none (its workers take them). They are
// addEngineFlags' flags, --queue and --isolation.
var engineOnlyFlags = []string{capacityFlag, "queue", memoryBudgetFlag, cpuThresholdFlag, "isolation"}

// frontendPolicy is the policy a cluster's front end validates requests
// with: the operator's limits and network settings from the same flags
// and environment as a local engine's. Each worker still holds requests
// to its own. It also returns the queue wait (queueWait is --queue-wait
// when given, else SCRATCHRUN_QUEUE_WAIT's or the default), resolved by
// the same code as a local engine's admission so that the front end
// cannot read it differently: negative means no waiting, which is what
// frontend.Config.QueueWait takes too.
func frontendPolicy(log *slog.Logger, queueWait *time.Duration) (execapi.Policy, time.Duration, error) {
	cfg, err := engineConfig(log, engineOverrides{queueWait: queueWait})
	if err != nil {
		return execapi.Policy{}, 0, err
	}
	// Only the policy's network fields are wanted: the front end prepares
	// no network for anyone.
	if _, err := networkSettings(&cfg); err != nil {
		return execapi.Policy{}, 0, err
	}
	return cfg.Policy, cfg.Admission.QueueWait, nil
}

// openFrontend connects to NATS and starts the front end over the
// registry there. queueWait is frontendPolicy's (negative: no waiting).
func openFrontend(nf *natsFlags, log *slog.Logger, policy execapi.Policy, queueWait time.Duration) (*frontend.Frontend, *nats.Conn, error) {
	opts, err := nf.options("scratchrun front end", log)
	if err != nil {
		return nil, nil, err
	}
	nc, err := cluster.Connect(opts)
	if err != nil {
		return nil, nil, err
	}
	cfg := frontend.Config{Conn: nc, Policy: policy, QueueWait: queueWait, Logger: log}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fe, err := frontend.New(ctx, cfg)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return fe, nc, nil
}

// clusterText says in a line what the front end sees of its cluster.
func clusterText(fe *frontend.Frontend, nc *nats.Conn) string {
	return fmt.Sprintf("cluster front end: NATS at %s, %d workers live", nc.ConnectedUrlRedacted(), len(fe.Workers()))
}
