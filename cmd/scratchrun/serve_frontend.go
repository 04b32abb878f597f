//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
)

// openFrontend connects to NATS and starts the front end over the
// registry there.
func openFrontend(n natsSetup, log *slog.Logger, f frontendSetup) (*frontend.Frontend, *nats.Conn, error) {
	opts, err := n.options("scratchrun front end", log)
	if err != nil {
		return nil, nil, err
	}
	nc, err := cluster.Connect(opts)
	if err != nil {
		return nil, nil, err
	}
	cfg := frontend.Config{Conn: nc, Policy: f.policy, Sessions: f.sessions, QueueWait: f.queueWait.frontend(), Logger: log}
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
