package httpapi

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
)

// hungWrites is a key store whose usage and refusal writes hang until
// their context ends, as they do on a PostgreSQL server that stopped
// answering; everything else is the real database.
type hungWrites struct {
	KeyStore
	usage, refusals atomic.Int64
}

func (h *hungWrites) RecordUsage(ctx context.Context, _ store.Usage) error {
	h.usage.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (h *hungWrites) RecordRefusal(ctx context.Context, _, _ string, _ time.Time) error {
	h.refusals.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

// syncBuffer is a log sink safe for the server's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// A key store whose writes hang holds up neither the answer of a run nor
// that of a refusal (each write is cut off at Config.RecordTimeout and
// logged as lost), nor the drain after them. Before the bound, both
// requests hung for as long as the database did.
func TestHungKeyStoreWritesDoNotPinHandlers(t *testing.T) {
	hung := &hungWrites{}
	logs := &syncBuffer{}
	ts := startServer(t, serverOptions{
		fake: scripted(), recordTimeout: 50 * time.Millisecond,
		keys: func(s *store.Store) KeyStore { hung.KeyStore = s; return hung },
		log:  slog.New(slog.NewTextHandler(logs, nil)),
	})
	_, key := ts.key("hung", 1, 1)

	// The bound only catches a hang: the answers come once the writes
	// are cut off.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ran, err := ts.do(ctx, http.MethodPost, "/v1/exec", key, strings.NewReader(`{"runtime":"bash","code":"echo hi"}`), nil)
	if err != nil || ran.status != http.StatusOK {
		t.Fatalf("run: %v %d %s", err, ran.status, ran.body)
	}
	refused, err := ts.do(ctx, http.MethodPost, "/v1/exec", key, strings.NewReader(`{"runtime":"bash","code":"echo hi"}`), nil)
	if err != nil || refused.status != http.StatusTooManyRequests {
		t.Fatalf("refusal: %v %d %s", err, refused.status, refused.body)
	}
	if hung.usage.Load() != 1 || hung.refusals.Load() != 1 {
		t.Errorf("writes tried: %d usage, %d refusals; want 1 and 1", hung.usage.Load(), hung.refusals.Load())
	}
	for _, want := range []string{"usage not recorded", "refusal not recorded", "did not answer within 50ms"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q:\n%s", want, logs.String())
		}
	}
	if err := ts.stop(); err != nil {
		t.Errorf("drain: %v", err)
	}
}
