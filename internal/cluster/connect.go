package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
)

// ConnOptions say how a process reaches NATS. Calls carry code and
// secrets (env), so beyond loopback the connection must be TLS and
// authenticated (Connect refuses otherwise unless AllowInsecure).
type ConnOptions struct {
	// URLs are the servers to try (nats:// or tls://), several for a
	// cluster: the client moves to another when one goes away.
	URLs []string
	// Name names the connection in the servers' monitoring.
	Name string
	// CAFile verifies the servers' certificates (and turns TLS on);
	// CertFile and KeyFile are this client's, for servers that verify
	// clients.
	CAFile, CertFile, KeyFile string
	// User and Password authenticate by name (NATS's authorization
	// users); NKeySeedFile by an nkey; CredsFile by a user JWT and seed
	// (decentralised auth). At most one way.
	User, Password string
	NKeySeedFile   string
	CredsFile      string
	// AllowInsecure lets a connection beyond loopback go without TLS or
	// credentials (on a network the operator trusts for it).
	AllowInsecure bool
	// Logger hears disconnections and reconnections.
	Logger *slog.Logger
}

// Reconnection: quickly and for ever. A node that dies closes its sockets
// and clients move to another within a fraction of a second; calls in
// flight carry on (their frames are numbered and sent again when lost).
const (
	reconnectWait   = 100 * time.Millisecond
	reconnectJitter = 100 * time.Millisecond
	// pingInterval and maxPingsOut notice a server that stopped answering
	// without closing the connection (a host gone from the network).
	pingInterval = 2 * time.Second
	maxPingsOut  = 3
	connectWait  = 5 * time.Second
	// flushTimeout bounds one write to the server (nats.go's is a minute):
	// a publisher writes to the socket itself once the client's buffer is
	// full, and meanwhile every other publish on the connection waits. A
	// link that cannot take a part (1 MiB) in 2 s is stalled as far as
	// calls are concerned, whose loss windows are 4 and 5 s: the write
	// fails, the client reconnects, and the frames lost are sent again.
	flushTimeout = 2 * time.Second
)

// Connect opens a connection with o, checked first (see Check).
func Connect(o ConnOptions) (*nats.Conn, error) {
	opts, err := o.natsOptions()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(strings.Join(o.URLs, ","), opts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", o.shownURLs(), err)
	}
	return nc, nil
}

// Check refuses options that would send calls in the clear or
// unauthenticated beyond loopback, and contradictory ones.
func (o ConnOptions) Check() error {
	if len(o.URLs) == 0 {
		return errors.New("no NATS server given")
	}
	ways := 0
	for _, set := range []bool{o.User != "", o.NKeySeedFile != "", o.CredsFile != ""} {
		if set {
			ways++
		}
	}
	if ways > 1 {
		return errors.New("give one way to authenticate to NATS: a user and password, an nkey seed, or a creds file")
	}
	if (o.CertFile == "") != (o.KeyFile == "") {
		return errors.New("a NATS client certificate needs its key, and the key its certificate")
	}
	if o.Password != "" && o.User == "" {
		return errors.New("a NATS password needs a user")
	}
	for _, u := range o.URLs {
		parsed, err := url.Parse(u)
		if err != nil || parsed.Host == "" {
			return fmt.Errorf("NATS server %q: want a URL such as nats://host:4222 or tls://host:4222", redactURL(u))
		}
		if parsed.User != nil {
			return fmt.Errorf("NATS server %s: give credentials with the flags (or their environment variables), not in the URL", redactURL(u))
		}
		if o.AllowInsecure || isLoopback(parsed.Hostname()) {
			continue
		}
		if parsed.Scheme != "tls" && o.CAFile == "" {
			return fmt.Errorf("NATS server %s is beyond loopback: use TLS (a tls:// URL, or a CA file) or allow it in the clear explicitly", redactURL(u))
		}
		if ways == 0 && o.CertFile == "" {
			return fmt.Errorf("NATS server %s is beyond loopback: authenticate (a user and password, an nkey, a creds file or a client certificate) or allow it without explicitly", redactURL(u))
		}
	}
	return nil
}

func (o ConnOptions) natsOptions() ([]nats.Option, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(reconnectWait),
		nats.ReconnectJitter(reconnectJitter, reconnectJitter),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(maxPingsOut),
		nats.Timeout(connectWait),
		nats.FlusherTimeout(flushTimeout),
		nats.DisconnectErrHandler(func(nc *nats.Conn, err error) {
			if err != nil { // nil: this side closed the connection
				log.Warn("nats: disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Warn("nats: reconnected", "server", redactURL(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(nc *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			log.Error("nats: asynchronous error", "subject", subject, "err", err)
		}),
	}
	if o.CAFile != "" {
		if _, err := os.Stat(o.CAFile); err != nil {
			return nil, fmt.Errorf("NATS CA file: %w", err)
		}
		opts = append(opts, nats.RootCAs(o.CAFile))
	}
	if o.CertFile != "" {
		opts = append(opts, nats.ClientCert(o.CertFile, o.KeyFile))
	}
	switch {
	case o.User != "":
		opts = append(opts, nats.UserInfo(o.User, o.Password))
	case o.NKeySeedFile != "":
		opt, err := nats.NkeyOptionFromSeed(o.NKeySeedFile)
		if err != nil {
			return nil, fmt.Errorf("NATS nkey seed %s: %w", o.NKeySeedFile, err)
		}
		opts = append(opts, opt)
	case o.CredsFile != "":
		if _, err := os.Stat(o.CredsFile); err != nil {
			return nil, fmt.Errorf("NATS creds file: %w", err)
		}
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	return opts, nil
}

func (o ConnOptions) shownURLs() string {
	shown := make([]string, len(o.URLs))
	for i, u := range o.URLs {
		shown[i] = redactURL(u)
	}
	return strings.Join(shown, ",")
}

// isLoopback reports whether host is this machine: a loopback address or
// "localhost".
func isLoopback(host string) bool {
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// redactURL hides a password a URL may carry.
func redactURL(u string) string {
	parsed, err := url.Parse(u)
	if err != nil {
		return "(unparsable URL)"
	}
	return parsed.Redacted()
}
