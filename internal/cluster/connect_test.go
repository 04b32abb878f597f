package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// Calls carry code and secrets: beyond loopback a connection needs TLS
// and credentials unless the operator says otherwise; credentials belong
// in their options, never a URL; one way to authenticate at a time.
func TestConnOptionsCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		o    ConnOptions
		want string // "" when allowed
	}{
		{"loopback in the clear", ConnOptions{URLs: []string{"nats://127.0.0.1:4222", "nats://localhost:4223"}}, ""},
		{"remote in the clear", ConnOptions{URLs: []string{"nats://nats.internal:4222"}, User: "w", Password: "p"}, "use TLS"},
		{"remote over TLS without credentials", ConnOptions{URLs: []string{"tls://nats.internal:4222"}}, "authenticate"},
		{"remote over TLS with a user", ConnOptions{URLs: []string{"tls://nats.internal:4222"}, User: "w", Password: "p"}, ""},
		{"remote with a CA and a client certificate", ConnOptions{URLs: []string{"nats://10.0.0.2:4222"}, CAFile: "ca.pem", CertFile: "c.pem", KeyFile: "k.pem"}, ""},
		{"remote allowed insecure", ConnOptions{URLs: []string{"nats://10.0.0.2:4222"}, AllowInsecure: true}, ""},
		{"credentials in the URL", ConnOptions{URLs: []string{"tls://w:secret@nats.internal:4222"}}, "not in the URL"},
		{"two ways", ConnOptions{URLs: []string{"nats://127.0.0.1:4222"}, User: "w", CredsFile: "x.creds"}, "one way"},
		{"a password alone", ConnOptions{URLs: []string{"nats://127.0.0.1:4222"}, Password: "p"}, "needs a user"},
		{"a certificate without its key", ConnOptions{URLs: []string{"nats://127.0.0.1:4222"}, CertFile: "c.pem"}, "needs its key"},
		{"no server", ConnOptions{}, "no NATS server"},
		{"not a URL", ConnOptions{URLs: []string{"127.0.0.1"}}, "want a URL"},
	} {
		err := c.o.Check()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: refused: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error saying %q", c.name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "secret"):
			t.Errorf("%s: the error shows the password: %v", c.name, err)
		}
	}
}

// A write to a stalled server gives up well within a call's loss windows
// (a front end loses a silent worker's call after 4 s, a worker a silent
// caller's after 5 s), not after nats.go's minute, during which every
// other publish on the connection would wait.
func TestConnectionWritesGiveUpWithinTheLossWindows(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{})
	nc, err := Connect(ConnOptions{URLs: ns.URLs(), Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if d := nc.Opts.FlusherTimeout; d <= 0 || d > 2*time.Second {
		t.Errorf("a write to the server may block for %s", d)
	}
}
