//go:build linux

package main

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// recordedFrontend is a front end whose sessions go through a
// sessionrecord.Recorder over the shared store: the rows name each
// session's worker, so that any front end routes its calls there, and
// they outlive the front end that opened it. Calls are the front end's
// own; the Recorder is embedded a level shallower than the front end, so
// every session method is the Recorder's, as recordedEngine's are.
type recordedFrontend struct {
	*sessionrecord.Recorder
	frontendBehind
}

// frontendBehind puts the front end one embedding level below the
// Recorder (see recordedFrontend).
type frontendBehind struct{ *frontend.Frontend }

var (
	_ execapi.Service        = recordedFrontend{}
	_ execapi.SessionService = recordedFrontend{}
	_ execapi.SessionAdmin   = recordedFrontend{}
)

// frontendService is what a front end serves: fe itself with sessions
// off, else fe with its sessions recorded in rows; stop ends the
// Recorder's poll loop.
func frontendService(fe *frontend.Frontend, rows *store.Store, log *slog.Logger) (svc execapi.Service, stop func(), err error) {
	if !fe.SessionPolicy().Enabled {
		return fe, func() {}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	rec, err := sessionrecord.New(ctx, fe, rows, sessionrecord.Config{Cluster: true, Logger: log})
	if err != nil {
		cancel()
		return nil, nil, fmt.Errorf("sessions: %w", err)
	}
	return recordedFrontend{Recorder: rec, frontendBehind: frontendBehind{fe}}, func() { cancel(); <-rec.Done() }, nil
}
