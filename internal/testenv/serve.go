package testenv

import (
	"context"
	"net"
	"testing"
)

// ServeLoopback runs serve (an HTTP server's Serve) on a new listener on
// 127.0.0.1 until t ends, and returns its URL ("http://127.0.0.1:port").
// At the end serve's context is cancelled and serve must return nil.
func ServeLoopback(t testing.TB, serve func(context.Context, net.Listener) error) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
