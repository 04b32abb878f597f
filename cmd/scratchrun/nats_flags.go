package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/scratchrun/scratchrun/internal/cluster"
)

// natsFlags are how `worker` and `serve --nats` reach NATS. Each has an
// environment variable; secrets come from files or the environment, never
// a flag's value (a flag shows in ps).
type natsFlags struct {
	urls, ca, cert, key, user, passwordFile, nkey, creds string
	allowInsecure                                        bool
}

// addNATSFlags registers the NATS flags on fs.
func addNATSFlags(fs *flag.FlagSet, what string) *natsFlags {
	n := &natsFlags{}
	fs.StringVar(&n.urls, "nats", "", what+" (`URL[,URL...]`, nats:// or tls://; env SCRATCHRUN_NATS)")
	fs.StringVar(&n.ca, "nats-ca", "", "CA `FILE` that verifies the NATS servers (turns TLS on; env SCRATCHRUN_NATS_CA)")
	fs.StringVar(&n.cert, "nats-cert", "", "client certificate `FILE` for NATS servers that verify clients (env SCRATCHRUN_NATS_CERT)")
	fs.StringVar(&n.key, "nats-key", "", "client key `FILE` of --nats-cert (env SCRATCHRUN_NATS_KEY)")
	fs.StringVar(&n.user, "nats-user", "", "NATS user `NAME` (env SCRATCHRUN_NATS_USER); its password from --nats-password-file or SCRATCHRUN_NATS_PASSWORD")
	fs.StringVar(&n.passwordFile, "nats-password-file", "", "`FILE` holding the NATS user's password (env SCRATCHRUN_NATS_PASSWORD_FILE)")
	fs.StringVar(&n.nkey, "nats-nkey", "", "NATS nkey seed `FILE` (env SCRATCHRUN_NATS_NKEY)")
	fs.StringVar(&n.creds, "nats-creds", "", "NATS credentials `FILE` (user JWT and seed; env SCRATCHRUN_NATS_CREDS)")
	fs.BoolVar(&n.allowInsecure, "nats-allow-insecure", false, "let NATS servers beyond loopback be reached without TLS or credentials (env SCRATCHRUN_NATS_ALLOW_INSECURE=1; calls carry code and secrets: only on a network you trust for that)")
	return n
}

// given reports whether a NATS server was named, by flag or environment.
func (n *natsFlags) given() bool { return n.urlList() != nil }

// urlList is the NATS servers named by --nats, else SCRATCHRUN_NATS.
func (n *natsFlags) urlList() []string {
	return splitList(firstNonEmpty(n.urls, os.Getenv("SCRATCHRUN_NATS")))
}

// options resolves the flags and their environment variables into the
// connection's options, reading the password file.
func (n *natsFlags) options(name string, log *slog.Logger) (cluster.ConnOptions, error) {
	o := cluster.ConnOptions{
		URLs: n.urlList(), Name: name, Logger: log,
		CAFile:       firstNonEmpty(n.ca, os.Getenv("SCRATCHRUN_NATS_CA")),
		CertFile:     firstNonEmpty(n.cert, os.Getenv("SCRATCHRUN_NATS_CERT")),
		KeyFile:      firstNonEmpty(n.key, os.Getenv("SCRATCHRUN_NATS_KEY")),
		User:         firstNonEmpty(n.user, os.Getenv("SCRATCHRUN_NATS_USER")),
		NKeySeedFile: firstNonEmpty(n.nkey, os.Getenv("SCRATCHRUN_NATS_NKEY")),
		CredsFile:    firstNonEmpty(n.creds, os.Getenv("SCRATCHRUN_NATS_CREDS")),
	}
	o.AllowInsecure = n.allowInsecure || os.Getenv("SCRATCHRUN_NATS_ALLOW_INSECURE") == "1"
	if file := firstNonEmpty(n.passwordFile, os.Getenv("SCRATCHRUN_NATS_PASSWORD_FILE")); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return o, fmt.Errorf("--nats-password-file: %w", err)
		}
		o.Password = strings.TrimRight(string(data), "\r\n")
	} else {
		o.Password = os.Getenv("SCRATCHRUN_NATS_PASSWORD")
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	return o, nil
}
