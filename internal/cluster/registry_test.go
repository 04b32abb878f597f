package cluster_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// startAuthNATS starts a server with the project's permissions
// (deploy/nats/auth.conf) and returns the users' passwords.
func startAuthNATS(t *testing.T) (*natsserver.Cluster, map[string]string) {
	t.Helper()
	secrets := map[string]string{}
	for _, user := range []string{"frontend", "worker-1", "worker-2", "worker-3"} {
		secrets[user] = "secret-" + user
		t.Setenv("SCRATCHRUN_NATS_"+strings.ToUpper(strings.ReplaceAll(user, "-", "_"))+"_PASSWORD", secrets[user])
	}
	return natsserver.Start(t, natsserver.Options{Include: []string{"../../deploy/nats/auth.conf"}}), secrets
}

// connectAs opens a connection as a user of auth.conf, closed when the
// test ends.
func connectAs(t *testing.T, urls []string, user, password string) *nats.Conn {
	t.Helper()
	nc, err := cluster.Connect(cluster.ConnOptions{URLs: urls, Name: user, User: user, Password: password})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// A worker's credentials reach only its own registry entry, whatever
// headers it sends: a registration with "Nats-Rollup: all" (which would
// purge every other key of the bucket's stream) is refused, and the other
// workers' entries stay; the worker still deletes its own key.
func TestWorkerCannotRollUpTheRegistry(t *testing.T) {
	ns, secrets := startAuthNATS(t)
	feConn := connectAs(t, ns.URLs(), "frontend", secrets["frontend"])
	js, err := jetstream.New(feConn)
	if err != nil {
		t.Fatal(err)
	}
	// The bucket as front ends made it before: with roll-ups allowed. A
	// front end starting now sets it right.
	if _, err := js.CreateOrUpdateKeyValue(timeoutCtx(t, 10*time.Second), jetstream.KeyValueConfig{Bucket: cluster.RegistryBucket,
		History: 1, TTL: time.Minute, Storage: jetstream.MemoryStorage, MaxValueSize: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	f, err := frontend.New(timeoutCtx(t, 30*time.Second), frontend.Config{Conn: feConn, Policy: execapi.DefaultPolicy(), Replicas: 1,
		// Entries outlive the test: only the roll-up could remove one.
		Timing: frontend.Timing{LiveWindow: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	register := func(nc *nats.Conn, id, version string, header nats.Header) {
		t.Helper()
		data, _ := json.Marshal(cluster.Registration{ID: id, Instance: id, Info: execapi.Info{Version: version, Runtimes: []execapi.RuntimeInfo{{Name: "bash"}}}})
		m := nats.NewMsg(cluster.RegistrySubject(id))
		m.Data = data
		for k, vs := range header {
			m.Header[k] = vs
		}
		if err := nc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	w1 := connectAs(t, ns.URLs(), "worker-1", secrets["worker-1"])
	w2 := connectAs(t, ns.URLs(), "worker-2", secrets["worker-2"])
	register(w2, "worker-2", "v", nil)
	register(w1, "worker-1", "v", nil)
	waitWorkers(t, f, "worker-1", "worker-2")

	register(w1, "worker-1", "rollup", nats.Header{"Nats-Rollup": []string{"all"}})
	// The stream takes one publisher's messages in order: once the next
	// is seen, the roll-up was taken or refused.
	register(w1, "worker-1", "after", nil)
	waitFor(t, "worker-1's next registration", func() bool {
		ws := f.Workers()
		return len(ws) > 0 && ws[0].ID == "worker-1" && ws[0].Version == "after"
	})
	kv, err := js.KeyValue(timeoutCtx(t, 10*time.Second), cluster.RegistryBucket)
	if err != nil {
		t.Fatal(err)
	}
	keys, err := kv.Keys(timeoutCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"worker-1", "worker-2"}) {
		t.Fatalf("the registry holds %v after worker-1 sent a roll-up; want both workers' entries", keys)
	}

	// Its own key it still withdraws, as a draining worker does.
	del := nats.NewMsg(cluster.RegistrySubject("worker-1"))
	del.Header.Set("KV-Operation", "DEL")
	if err := w1.PublishMsg(del); err != nil {
		t.Fatal(err)
	}
	waitWorkers(t, f, "worker-2")
	if keys, err := kv.Keys(timeoutCtx(t, 10*time.Second)); err != nil || !slices.Equal(keys, []string{"worker-2"}) {
		t.Errorf("the registry holds %v (%v) after worker-1 withdrew; want worker-2's entry", keys, err)
	}
}
