package frontend

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/scratchrun/scratchrun/internal/cluster"
)

// openRegistry creates the bucket of live workers, or binds the one
// there: in memory (nothing of it is worth a disk), one value per key,
// entries expiring ttl after their last heartbeat.
func openRegistry(ctx context.Context, nc *nats.Conn, ttl time.Duration, replicas int, log *slog.Logger) (jetstream.KeyValue, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("frontend: JetStream: %w", err)
	}
	if replicas <= 0 {
		replicas = 1
		if nc.ConnectedClusterName() != "" {
			replicas = 3
		}
	}
	scfg := registryStream(ttl, replicas)
	for {
		_, err := js.CreateOrUpdateStream(ctx, scfg)
		if err == nil {
			return js.KeyValue(ctx, cluster.RegistryBucket)
		}
		// Another front end (or the operator) made it otherwise: use it as
		// it is.
		if existing, berr := js.KeyValue(ctx, cluster.RegistryBucket); berr == nil {
			log.Warn("the registry bucket exists with other settings; using it as it is", "err", err)
			return existing, nil
		}
		// JetStream may still be electing its leaders (servers started
		// together with the front end): try again until ctx gives up.
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("frontend: open the registry of workers (JetStream must be enabled on the NATS servers): %w", err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// registryStream is the stream behind the registry's key-value bucket:
// what jetstream.KeyValueConfig makes of it (history 1, a TTL, memory),
// except that it refuses roll-ups and purges. A worker may publish only
// its own key, but a message carrying "Nats-Rollup: all" would purge
// every other key of the stream with it, and NATS's permissions cannot
// filter headers: the stream itself must refuse them. Neither side needs
// a roll-up: workers put values and delete their key with the delete
// marker (KV-Operation: DEL), which is no roll-up, and entries leave by
// their TTL.
func registryStream(ttl time.Duration, replicas int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              "KV_" + cluster.RegistryBucket,
		Description:       "ScratchRun's live workers (heartbeats; expire on silence)",
		Subjects:          []string{cluster.RegistrySubject(">")},
		MaxMsgsPerSubject: 1,
		MaxMsgs:           -1,
		MaxBytes:          -1,
		MaxAge:            ttl,
		MaxMsgSize:        1 << 20,
		MaxConsumers:      -1,
		Storage:           jetstream.MemoryStorage,
		Replicas:          replicas,
		Discard:           jetstream.DiscardNew,
		Duplicates:        min(ttl, 2*time.Minute),
		AllowDirect:       true,
		AllowRollup:       false,
		DenyDelete:        true,
		DenyPurge:         true,
	}
}
