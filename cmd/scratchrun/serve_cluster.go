package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// engineOnlyFlags are serve's flags that shape a local engine: a
// cluster's front end has none (its workers take them).
var engineOnlyFlags = []string{"capacity", "queue", "memory-budget", "cpu-threshold", "isolation"}

// frontendPolicy is the policy a cluster's front end validates requests
// with: the operator's limits and network settings from the same flags
// and environment as a local engine's. Each worker still holds requests
// to its own.
func frontendPolicy(log *slog.Logger) (execapi.Policy, error) {
	cfg, err := engineConfig(log, engineOverrides{})
	if err != nil {
		return execapi.Policy{}, err
	}
	// Only the policy's network fields are wanted: the front end prepares
	// no network for anyone.
	if _, err := networkSettings(&cfg); err != nil {
		return execapi.Policy{}, err
	}
	return cfg.Policy, nil
}

// openFrontend connects to NATS and starts the front end over the
// registry there. queueWait is --queue-wait when given (0: no waiting),
// else SCRATCHRUN_QUEUE_WAIT's.
func openFrontend(nf *natsFlags, log *slog.Logger, policy execapi.Policy, queueWait *time.Duration) (*frontend.Frontend, *nats.Conn, error) {
	opts, err := nf.options("scratchrun front end", log)
	if err != nil {
		return nil, nil, err
	}
	if v := os.Getenv("SCRATCHRUN_QUEUE_WAIT"); queueWait == nil && v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return nil, nil, fmt.Errorf("SCRATCHRUN_QUEUE_WAIT=%q: want a duration such as 2s (0: no waiting)", v)
		}
		queueWait = &d
	}
	nc, err := cluster.Connect(opts)
	if err != nil {
		return nil, nil, err
	}
	cfg := frontend.Config{Conn: nc, Policy: policy, Logger: log}
	if queueWait != nil {
		cfg.QueueWait = *queueWait
		if *queueWait == 0 {
			cfg.QueueWait = -1
		}
	}
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
