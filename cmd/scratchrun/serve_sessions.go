//go:build linux

package main

import (
	"context"
	"time"

	"github.com/scratchrun/scratchrun/internal/engine"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// recordedEngine is serve's local engine with its sessions kept in the
// store's rows: the engine answers calls (and its pool and admission
// reports, which httpapi reads from the concrete value), the Recorder
// answers every session method, so that no session is opened, looked up,
// used or ended past the rows that outlive the process (a restart's owners
// are told why their ids ended; the operator's CLI ends them through the
// rows). The Recorder is embedded one level shallower than the engine, so
// by Go's selector rule each method both have is the Recorder's: a session
// method added to the contract later cannot silently reach the engine
// past the rows, as a forwarding list would let it.
type recordedEngine struct {
	*sessionrecord.Recorder
	engineBehind
}

// engineBehind puts the engine one embedding level below the Recorder
// (see recordedEngine).
type engineBehind struct{ *engine.Engine }

var (
	_ execapi.CheckedExecutor = recordedEngine{}
	_ execapi.SessionService  = recordedEngine{}
	_ execapi.SessionAdmin    = recordedEngine{}
)

// recordEngine wraps eng in a Recorder over keys when its sessions are
// on; the Recorder's poll loop runs until ctx is done. Off, eng is served
// as it was before sessions existed (no wrapper, no rows, no loop).
func recordEngine(ctx context.Context, eng *engine.Engine, keys *store.Store, cfg sessionrecord.Config) (execapi.Service, *sessionrecord.Recorder, error) {
	if !eng.SessionPolicy().Enabled {
		return eng, nil, nil
	}
	rec, err := sessionrecord.New(ctx, eng, keys, cfg)
	if err != nil {
		return nil, nil, err
	}
	return recordedEngine{Recorder: rec, engineBehind: engineBehind{eng}}, rec, nil
}

// endRecorded marks the rows of rec's server ended for a shutdown: the
// engine's Close ends the sessions themselves, unseen by the Recorder, and
// without this their owners would be told of a restart at the next start
// rather than of the shutdown that ended them.
func endRecorded(keys *store.Store, rec *sessionrecord.Recorder) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := keys.EndServerCodeSessions(ctx, rec.Server(), "", string(execapi.EndServerShutdown), time.Now())
	return err
}
