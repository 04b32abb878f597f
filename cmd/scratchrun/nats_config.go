//go:build linux

package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// natsSetup is how `worker`, `serve --nats` and `bench --cluster` reach
// NATS. Secrets come from files or the environment, never a flag's value
// (a flag shows in ps).
type natsSetup struct {
	urls                                                     []string
	ca, cert, key, user, password, passwordFile, nkey, creds string
	allowInsecure                                            bool
}

// parseNATS reads the NATS settings.
func parseNATS(v *settings.Values) natsSetup {
	return natsSetup{
		urls: v.List(settings.NATS), ca: v.String(settings.NATSCA), cert: v.String(settings.NATSCert), key: v.String(settings.NATSKey),
		user: v.String(settings.NATSUser), password: v.String(settings.NATSPassword), passwordFile: v.String(settings.NATSPasswordFile),
		nkey: v.String(settings.NATSNKey), creds: v.String(settings.NATSCreds), allowInsecure: v.Bool(settings.NATSAllowInsecure),
	}
}

// given reports whether a NATS server was named, by flag or environment.
func (n natsSetup) given() bool { return len(n.urls) > 0 }

// options are the connection's options, the password file read.
func (n natsSetup) options(name string, log *slog.Logger) (cluster.ConnOptions, error) {
	o := cluster.ConnOptions{
		URLs: n.urls, Name: name, Logger: log, CAFile: n.ca, CertFile: n.cert, KeyFile: n.key, User: n.user,
		NKeySeedFile: n.nkey, CredsFile: n.creds, AllowInsecure: n.allowInsecure, Password: n.password,
	}
	if n.passwordFile != "" {
		data, err := os.ReadFile(n.passwordFile)
		if err != nil {
			return o, fmt.Errorf("--nats-password-file: %w", err)
		}
		o.Password = strings.TrimRight(string(data), "\r\n")
	}
	if err := o.Check(); err != nil {
		return o, err
	}
	return o, nil
}
