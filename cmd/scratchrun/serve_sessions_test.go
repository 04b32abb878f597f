//go:build linux

package main

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Every session method of what serve serves with sessions on (one machine
// and a front end) is the Recorder's, never the wrapped service's: a
// method that reached the engine or front end past the rows would answer
// an id after a restart with 404, or route a cluster's call to no worker.
// The wrapped service here is nil, so any method that reached it panics.
func TestRecordedServicesAnswerEverySessionMethodThroughTheRows(t *testing.T) {
	ctx, cancel := context.WithCancel(execapi.WithCaller(context.Background(), "k1"))
	defer cancel()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	p := execapi.DefaultSessionPolicy()
	p.Enabled = true
	rec, err := sessionrecord.New(ctx, execapitest.NewSessions(execapitest.New("bash"), p), st, sessionrecord.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { cancel(); <-rec.Done() }()
	for name, svc := range map[string]any{
		"recordedEngine":   recordedEngine{Recorder: rec},
		"recordedFrontend": recordedFrontend{Recorder: rec},
	} {
		for _, iface := range []reflect.Type{reflect.TypeFor[execapi.SessionService](), reflect.TypeFor[execapi.SessionAdmin]()} {
			for i := range iface.NumMethod() {
				m := iface.Method(i)
				t.Run(name+"."+m.Name, func(t *testing.T) {
					defer func() {
						if r := recover(); r != nil {
							t.Errorf("%s.%s reached the wrapped service, not the Recorder: %v", name, m.Name, r)
						}
					}()
					fn := reflect.ValueOf(svc).MethodByName(m.Name)
					args := make([]reflect.Value, fn.Type().NumIn())
					for j := range args {
						args[j] = reflect.Zero(fn.Type().In(j))
					}
					if len(args) > 0 {
						args[0] = reflect.ValueOf(ctx)
					}
					fn.Call(args)
				})
			}
		}
	}
}
