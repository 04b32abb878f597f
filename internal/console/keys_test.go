package console

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/store"
)

// Keys made, changed and revoked in the console are the store's: a new key
// is shown once with snippets for this server, works against /v1/exec,
// has its limits changed, and once revoked is refused.
func TestKeysThroughTheConsole(t *testing.T) {
	tc := startConsole(t, consoleOptions{})
	b := tc.browser()
	b.signIn()

	r := b.post("/console/api/keys", `{"name":"ci-agents"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	var created createdKey
	if err := json.Unmarshal([]byte(r.body), &created); err != nil {
		t.Fatal(err)
	}
	k := created.Key
	if k.RatePerMin != store.DefaultRatePerMin || k.Concurrency != store.DefaultConcurrency || !strings.HasPrefix(created.Secret, store.KeyPrefix) {
		t.Errorf("created %+v with secret %q", k, created.Secret)
	}
	var joined strings.Builder
	for _, s := range created.Snippets {
		joined.WriteString(s.Text + "\n")
	}
	for _, want := range []string{tc.URL + "/mcp", "Bearer " + created.Secret, "SCRATCHRUN_API_URL=" + tc.URL, "--allow-http", "${SCRATCHRUN_API_KEY}", tc.URL + "/v1/exec"} {
		if !strings.Contains(joined.String(), want) {
			t.Errorf("the snippets lack %q:\n%s", want, joined.String())
		}
	}
	for _, s := range created.Snippets {
		if strings.HasPrefix(s.Text, "{") && !json.Valid([]byte(s.Text)) {
			t.Errorf("snippet %q is not JSON:\n%s", s.Client, s.Text)
		}
	}

	// The key works, and its secret is never shown again.
	if a := apiExec(t, tc.URL, created.Secret); a != http.StatusOK {
		t.Fatalf("the new key against /v1/exec: %d", a)
	}
	var list struct{ Keys []keyView }
	b.getJSON("/console/api/keys", &list)
	if len(list.Keys) != 1 || list.Keys[0].ID != k.ID || time.Time(list.Keys[0].LastUsed).IsZero() {
		t.Errorf("list: %+v", list.Keys)
	}
	if lr := b.do(http.MethodGet, "/console/api/keys", "", "", nil); strings.Contains(lr.body, created.Secret) {
		t.Error("the key list shows the secret")
	}

	for body, field := range map[string]string{
		`{"name":"ci-agents"}`:                   "name", // taken by an active key
		`{"name":"bad name!"}`:                   "name",
		`{"name":""}`:                            "name",
		`{"name":"x","rate_per_min":0}`:          "rate_per_min",
		`{"name":"x","concurrency":-1}`:          "concurrency",
		`{"name":"x","colour":"red"}`:            "body",
		`{"name":"x"}{"name":"y"}`:               "body",
		`{"name":"x","rate_per_min":"fast"}`:     "body",
		`{"name":"x","rate_per_min":1.5}`:        "body",
		`{"name":"x","concurrency":2,"extra":1}`: "body",
	} {
		r := b.post("/console/api/keys", body)
		if r.status != http.StatusBadRequest || errorOf(t, r).Field != field {
			t.Errorf("create %s: %d %s, want 400 naming %s", body, r.status, r.body, field)
		}
	}

	if r := b.post("/console/api/keys/"+k.ID+"/limits", `{"rate_per_min":7,"concurrency":3}`); r.status != http.StatusOK {
		t.Fatalf("set limits: %d %s", r.status, r.body)
	}
	if got, _ := tc.keys.KeyByID(context.Background(), k.ID); got.RatePerMin != 7 || got.Concurrency != 3 {
		t.Errorf("limits in the store: %+v", got)
	}
	for body, field := range map[string]string{`{}`: "rate_per_min", `{"name":"new"}`: "name", `{"concurrency":0}`: "concurrency"} {
		if r := b.post("/console/api/keys/"+k.ID+"/limits", body); r.status != http.StatusBadRequest || errorOf(t, r).Field != field {
			t.Errorf("set limits %s: %d %s", body, r.status, r.body)
		}
	}
	// The path takes ids only, not names.
	if r := b.post("/console/api/keys/ci-agents/revoke", `{}`); r.status != http.StatusNotFound {
		t.Errorf("revoke by name in the path: %d", r.status)
	}

	if r := b.post("/console/api/keys/"+k.ID+"/revoke", `{}`); r.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	if a := apiExec(t, tc.URL, created.Secret); a != http.StatusUnauthorized {
		t.Errorf("the revoked key against /v1/exec: %d", a)
	}
	if r := b.post("/console/api/keys/"+k.ID+"/revoke", `{}`); r.status != http.StatusNotFound {
		t.Errorf("revoke twice: %d", r.status)
	}
	if r := b.post("/console/api/keys/"+k.ID+"/limits", `{"rate_per_min":1}`); r.status != http.StatusNotFound {
		t.Errorf("limits of a revoked key: %d", r.status)
	}
	b.getJSON("/console/api/keys", &list)
	if len(list.Keys) != 1 || time.Time(list.Keys[0].Revoked).IsZero() {
		t.Errorf("list after revoking: %+v", list.Keys)
	}
	// Its name is free again.
	if r := b.post("/console/api/keys", `{"name":"ci-agents","rate_per_min":5,"concurrency":1}`); r.status != http.StatusCreated {
		t.Errorf("a new key of a revoked key's name: %d %s", r.status, r.body)
	}
}

// apiExec calls POST /v1/exec with a key and returns the status.
func apiExec(t *testing.T, base, key string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/exec", strings.NewReader(`{"runtime":"bash","code":"true"}`))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The snippets' shell lines quote what a shell would read otherwise.
func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"http://127.0.0.1:8722":    "http://127.0.0.1:8722",
		"Authorization: Bearer x":  "'Authorization: Bearer x'",
		"it's":                     `'it'\''s'`,
		"$(reboot)":                "'$(reboot)'",
		"":                         "''",
		"SCRATCHRUN_API_KEY=sr_li": "SCRATCHRUN_API_KEY=sr_li",
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %s, want %s", in, got, want)
		}
	}
}
