package hydra

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvBinary names the Hydra binary the tests run (scripts/hydra.sh prints it).
const EnvBinary = "SCRATCHRUN_HYDRA"

// startWait bounds how long Hydra may take to become ready.
const startWait = 60 * time.Second

// Options shape one Hydra.
type Options struct {
	// AccessTokenTTL is how long access tokens live (default 5 minutes);
	// a test of expiry sets seconds.
	AccessTokenTTL time.Duration
	// Subject is whom the login app signs in when the authorization
	// request has no login_hint (default "alice").
	Subject string
}

// Instance is one running Hydra and its login and consent app.
type Instance struct {
	// PublicURL is Hydra's public endpoint and its issuer, as its tokens'
	// iss and its discovery document give it.
	PublicURL string
	// AdminURL is Hydra's admin API (clients, login and consent
	// requests, introspection). It has no authentication: it listens on
	// loopback only.
	AdminURL string

	opts   Options
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
	app    *app
}

// Start runs a Hydra for t, ready to issue tokens, stopped (by its pid)
// when t ends. It skips t under -short and fails it when SCRATCHRUN_HYDRA
// is unset: the full tier runs every test it has.
func Start(t testing.TB, o Options) *Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("skipped under -short (the fast tier): runs Ory Hydra")
	}
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		t.Fatalf("%s is not set: build Ory Hydra with scripts/hydra.sh and export %s=\"$(scripts/hydra.sh)\" (scripts/test.sh does)", EnvBinary, EnvBinary)
	}
	if o.AccessTokenTTL <= 0 {
		o.AccessTokenTTL = 5 * time.Minute
	}
	if o.Subject == "" {
		o.Subject = "alice"
	}
	h := &Instance{opts: o, dir: t.TempDir(), exited: make(chan struct{})}
	pub, adm := freePort(t), freePort(t)
	h.PublicURL = fmt.Sprintf("http://127.0.0.1:%d", pub)
	h.AdminURL = fmt.Sprintf("http://127.0.0.1:%d", adm)
	h.app = startApp(t, h)

	conf := filepath.Join(h.dir, "hydra.yml")
	if err := os.WriteFile(conf, []byte(h.config(pub, adm)), 0o600); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(h.dir, "hydra.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// --sqa-opt-out: without it Hydra reports usage to Ory over the
	// internet. --dev: an http issuer on loopback.
	h.cmd = exec.Command(bin, "serve", "all", "--dev", "--sqa-opt-out", "--config", conf)
	h.cmd.Dir = h.dir
	h.cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + h.dir, "TMPDIR=" + h.dir}
	h.cmd.Stdout, h.cmd.Stderr = logFile, logFile
	// If the test binary dies, Hydra goes with it.
	h.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("hydra: start %s: %v", bin, err)
	}
	go func() {
		h.cmd.Wait()
		close(h.exited)
	}()
	t.Cleanup(func() {
		if err := h.stop(); err != nil {
			t.Error(err)
		}
	})
	if err := h.waitReady(); err != nil {
		t.Fatal(err)
	}
	return h
}

// config is Hydra's configuration file (spec/config.json of Hydra v2.3.0).
func (h *Instance) config(pub, adm int) string {
	secret := make([]byte, 32)
	rand.Read(secret)
	return fmt.Sprintf(`dsn: memory
serve:
  public: {host: 127.0.0.1, port: %d}
  admin: {host: 127.0.0.1, port: %d}
urls:
  self: {issuer: %q, public: %q}
  login: %q
  consent: %q
  error: %q
secrets:
  system: [%q]
strategies:
  access_token: jwt
  jwt: {scope_claim: both}
ttl:
  access_token: %ds
oauth2:
  pkce: {enforced_for_public_clients: true}
oidc:
  dynamic_client_registration:
    enabled: true
    default_scope: [openid, offline_access, scratchrun]
webfinger:
  oidc_discovery:
    client_registration_url: %q
log:
  level: warn
  leak_sensitive_values: false
`, pub, adm, h.PublicURL, h.PublicURL, h.app.url+"/login", h.app.url+"/consent", h.app.url+"/error",
		hex.EncodeToString(secret), int(h.opts.AccessTokenTTL/time.Second), h.PublicURL+"/oauth2/register")
}

// waitReady waits until both of Hydra's ports answer /health/ready.
func (h *Instance) waitReady() error {
	deadline := time.Now().Add(startWait)
	c := &http.Client{Timeout: 2 * time.Second}
	for {
		ready := true
		for _, u := range []string{h.AdminURL, h.PublicURL} {
			resp, err := c.Get(u + "/health/ready")
			if err == nil {
				resp.Body.Close()
			}
			ready = ready && err == nil && resp.StatusCode == http.StatusOK
		}
		if ready {
			return nil
		}
		select {
		case <-h.exited:
			return fmt.Errorf("hydra: exited before it was ready:\n%s", h.LogTail())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("hydra: not ready after %s:\n%s", startWait, h.LogTail())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop ends Hydra by its pid: SIGTERM, then SIGKILL after 10 s.
func (h *Instance) stop() error {
	select {
	case <-h.exited:
		return nil
	default:
	}
	h.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-h.exited:
		return nil
	case <-time.After(10 * time.Second):
		h.cmd.Process.Kill()
		<-h.exited
		return errors.New("hydra: did not stop within 10 s of SIGTERM; killed")
	}
}

// Pid is Hydra's process id (for a test that checks it is gone).
func (h *Instance) Pid() int { return h.cmd.Process.Pid }

// Stop stops Hydra now, as the test's end would; waiting on it is safe.
func (h *Instance) Stop(t testing.TB) {
	t.Helper()
	if err := h.stop(); err != nil {
		t.Error(err)
	}
}

// LogTail is the end of Hydra's log, for a failing test's message.
func (h *Instance) LogTail() string {
	data, _ := os.ReadFile(filepath.Join(h.dir, "hydra.log"))
	if len(data) > 4000 {
		data = data[len(data)-4000:]
	}
	return strings.TrimSpace(string(data))
}

// IntrospectionURL is Hydra's RFC 7662 endpoint (on the admin port, so
// its discovery document does not name it).
func (h *Instance) IntrospectionURL() string { return h.AdminURL + "/admin/oauth2/introspect" }

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// adminDo sends a JSON request to the admin API and decodes its answer.
func (h *Instance) adminDo(ctx context.Context, method, path string, body, out any) error {
	return doJSON(ctx, method, h.AdminURL+path, body, out)
}
