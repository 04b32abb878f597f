// Package natsserver starts NATS servers inside a test's process: one, or a
// cluster of three on loopback with JetStream, as nats-server would run
// them, from configuration files written in a temporary directory (so that
// a test can include the project's own deploy files, such as the NATS
// permissions, in them). Tests kill and restart nodes to see what the
// cluster does without them.
//
// It must never listen beyond loopback, touch a server it did not start,
// or leave a server running or its directory behind.
package natsserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options shape the servers.
type Options struct {
	// Nodes is how many servers (1, or 3 for a cluster); default 1.
	Nodes int
	// Include are configuration files copied beside each node's own and
	// included by it (authorization and permissions, say).
	Include []string
	// TLS, when set, is each node's TLS block: its client port takes TLS
	// only.
	TLS *TLS
	// MaxPayload, when set, is the servers' max_payload.
	MaxPayload int
}

// TLS is a server's certificate, key and the CA it verifies clients with
// (client certificates are then asked for but not required unless
// Verify).
type TLS struct {
	Cert, Key, CA string
	Verify        bool
}

// Cluster is a set of running servers.
type Cluster struct {
	t     testing.TB
	dir   string
	opts  Options
	mu    sync.Mutex
	nodes []*node
}

type node struct {
	name        string
	port, route int
	conf        string
	srv         *server.Server
}

// Start starts the servers and waits until they take clients and (in a
// cluster) JetStream has a leader. They are shut down, and their
// directory removed, when t ends.
func Start(t testing.TB, o Options) *Cluster {
	t.Helper()
	if o.Nodes <= 0 {
		o.Nodes = 1
	}
	dir, err := os.MkdirTemp("", "sr-nats-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, dir: dir, opts: o}
	t.Cleanup(c.stop)
	for _, inc := range o.Include {
		data, err := os.ReadFile(inc)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(inc)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < o.Nodes; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), port: freePort(t), route: freePort(t)}
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		n.conf = filepath.Join(dir, n.name+".conf")
		if err := os.WriteFile(n.conf, []byte(c.config(n)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for i := range c.nodes {
		if err := c.start(i); err != nil {
			t.Fatal(err)
		}
	}
	c.waitJetStream()
	return c
}

// config is a node's configuration file.
func (c *Cluster) config(n *node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server_name: %s\nlisten: 127.0.0.1:%d\n", n.name, n.port)
	fmt.Fprintf(&b, "jetstream { store_dir: %q, max_memory_store: 268435456, max_file_store: 67108864 }\n", filepath.Join(c.dir, "js-"+n.name))
	if c.opts.MaxPayload > 0 {
		fmt.Fprintf(&b, "max_payload: %d\n", c.opts.MaxPayload)
	}
	if len(c.nodes) > 1 {
		var routes []string
		for _, o := range c.nodes {
			if o != n {
				routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", o.route)))
			}
		}
		fmt.Fprintf(&b, "cluster { name: scratchrun-test, listen: 127.0.0.1:%d, routes: [%s] }\n", n.route, strings.Join(routes, ", "))
	}
	if tls := c.opts.TLS; tls != nil {
		fmt.Fprintf(&b, "tls { cert_file: %q, key_file: %q, ca_file: %q, verify: %v }\n", tls.Cert, tls.Key, tls.CA, tls.Verify)
	}
	for _, inc := range c.opts.Include {
		fmt.Fprintf(&b, "include %q\n", filepath.Base(inc))
	}
	return b.String()
}

func (c *Cluster) start(i int) error {
	n := c.nodes[i]
	opts, err := server.ProcessConfigFile(n.conf)
	if err != nil {
		return fmt.Errorf("natsserver: %s: %w", n.name, err)
	}
	opts.NoSigs = true
	srv, err := server.NewServer(opts)
	if err != nil {
		return fmt.Errorf("natsserver: %s: %w", n.name, err)
	}
	srv.Start()
	if !srv.ReadyForConnections(20 * time.Second) {
		srv.Shutdown()
		return fmt.Errorf("natsserver: %s did not take clients within 20 s", n.name)
	}
	c.mu.Lock()
	n.srv = srv
	c.mu.Unlock()
	return nil
}

// waitJetStream waits until JetStream has a meta leader that every
// running node follows.
func (c *Cluster) waitJetStream() {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		leader, current := false, true
		for _, n := range c.running() {
			leader = leader || n.srv.JetStreamIsLeader() || len(c.nodes) == 1
			current = current && n.srv.JetStreamIsCurrent()
		}
		if leader && current {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal("natsserver: JetStream has no leader after 30 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *Cluster) running() []*node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node
	for _, n := range c.nodes {
		if n.srv != nil {
			out = append(out, n)
		}
	}
	return out
}

// URLs are the client URLs of every node (nats://, or tls:// with TLS).
func (c *Cluster) URLs() []string {
	scheme := "nats"
	if c.opts.TLS != nil {
		scheme = "tls"
	}
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = fmt.Sprintf("%s://127.0.0.1:%d", scheme, n.port)
	}
	return out
}

// URL is one node's client URL.
func (c *Cluster) URL(i int) string { return c.URLs()[i] }

// StoreDir is where the nodes keep JetStream's files (nothing of the
// project's should be there: its bucket is in memory).
func (c *Cluster) StoreDir() string { return c.dir }

// Kill stops node i at once, as a crash would (its clients' connections
// close).
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	srv := c.nodes[i].srv
	c.nodes[i].srv = nil
	c.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// Restart starts node i again after Kill.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if err := c.start(i); err != nil {
		c.t.Fatal(err)
	}
	c.waitJetStream()
}

// Server is node i's server (nil while killed).
func (c *Cluster) Server(i int) *server.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i].srv
}

func (c *Cluster) stop() {
	for i := range c.nodes {
		c.Kill(i)
	}
	if err := os.RemoveAll(c.dir); err != nil {
		c.t.Errorf("natsserver: %v", err)
	}
}

// freePort finds a loopback port nobody listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
