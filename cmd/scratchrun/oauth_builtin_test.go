package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/mcpnode"
)

// The built-in authorization server, as a self-hoster adding ScratchRun as
// a connector meets it: the official TypeScript SDK registers itself,
// a person signs in on the consent page in a real browser by pasting an
// API key, code runs, the token is refreshed (the refresh token rotating),
// the key's rate holds the token, and revoking the key ends access and
// refresh tokens alike. A cross-site post of the consent form is refused.
func TestServeOAuthBuiltIn(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, a browser and node")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	created := time.Now()
	apiKey := createKey(t, db, "connector", "--rate", "4/min", "--concurrency", "2")
	srv := startServeEnv(t, []string{"SCRATCHRUN_OAUTH=builtin"}, "--db", db)
	mcpURL := srv.url + "/mcp"
	b := startBrowser(t, 1000, 800)

	n := mcpnode.StartOAuthClient(t, mcpURL, "--refresh")
	n.Next("CALLBACK")
	authURL := n.Next("AUTHORIZE")
	if !strings.HasPrefix(authURL, srv.url+"/oauth/authorize?") || !strings.Contains(authURL, "code_challenge_method=S256") ||
		!strings.Contains(authURL, "resource="+url.QueryEscape(mcpURL)) {
		t.Fatalf("the SDK went to %s: want the built-in authorization endpoint, with S256 and the resource", authURL)
	}

	// A page of another site that posts the consent form, with this
	// request's id and CSRF token even, is refused.
	b.do("open the consent page", chromedp.Navigate(authURL), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	id := eval[string](b, `document.querySelector('input[name=id]').value`)
	csrf := eval[string](b, `document.querySelector('input[name=csrf]').value`)
	if page := eval[string](b, `document.body.innerText`); !strings.Contains(page, "127.0.0.1") {
		t.Errorf("the consent page does not name the redirect's host: %q", page)
	}
	evil := startCrossSitePage(t, srv.url+"/oauth/consent", [][2]string{{"id", id}, {"csrf", csrf}, {"api_key", apiKey}, {"action", "allow"}})
	b.do("post the consent from another site", chromedp.Navigate(evil), chromedp.WaitVisible(chromedp.CSS("#evil-form")), chromedp.Click(chromedp.CSS("#evil-submit")))
	b.waitLoaded(srv.url)
	if page := strings.ToLower(eval[string](b, `document.body.innerText`)); !strings.Contains(page, "forbidden") && !strings.Contains(page, "cross-site") {
		t.Fatalf("a cross-site consent post answered: %q", page)
	}

	// The person, on the server's own page: a wrong key first, then theirs.
	b.do("open the consent page again", chromedp.Navigate(authURL), chromedp.WaitVisible(chromedp.CSS("#api_key")))
	b.do("paste a wrong key", chromedp.SendKeys(chromedp.CSS("#api_key"), "sr_live_notakey"), chromedp.Click(chromedp.CSS("#allow")))
	// The answer is a new page with the error on it: waiting for the error,
	// not for the form (the old page's form is there until the new page
	// replaces it, and a key typed into it is lost).
	b.do("see the form again, with the error", chromedp.WaitVisible(chromedp.CSS("#error")))
	if msg := b.text("#error"); !strings.Contains(msg, "not an active API key") {
		t.Fatalf("a wrong key's page says %q", msg)
	}
	b.do("paste the key and allow", chromedp.SendKeys(chromedp.CSS("#api_key"), apiKey), chromedp.Click(chromedp.CSS("#allow")))
	if res := n.Next("RESULT"); !strings.Contains(res, "oauth-ok") {
		t.Fatalf("tool result after sign-in: %s", res)
	}
	var refreshed struct {
		Answer any    `json:"answer"`
		Before string `json:"before"`
		After  string `json:"after"`
	}
	if err := json.Unmarshal([]byte(n.Next("REFRESHED")), &refreshed); err != nil {
		t.Fatal(err)
	}
	if refreshed.Before == "" || refreshed.After == "" || refreshed.Before == refreshed.After {
		t.Fatalf("refresh tokens before and after a refresh: %q, %q: want two, different", refreshed.Before, refreshed.After)
	}
	var end struct {
		Tokens struct {
			AccessToken  string `json:"access_token"`
			RefreshToken string `json:"refresh_token"`
		} `json:"tokens"`
		Client struct {
			ClientID string `json:"client_id"`
		} `json:"client"`
	}
	if err := json.Unmarshal([]byte(n.Next("TOKENS")), &end); err != nil || end.Tokens.AccessToken == "" || end.Client.ClientID == "" {
		t.Fatalf("tokens at the end: %+v %v", end, err)
	}
	n.Wait()
	b.checkProblems()

	// The key allows 4 calls a minute; the SDK spent them (two sessions,
	// two runs). More with its token are refused, allowing for the bucket's
	// refill since the key was made.
	refills := int(time.Since(created)/(15*time.Second)) + 1
	refusedAt := 0
	for i := 1; i <= refills+2; i++ {
		if status, _ := mcpInitialize(t, mcpURL, end.Tokens.AccessToken); status == http.StatusTooManyRequests {
			refusedAt = i
			break
		}
	}
	if refusedAt == 0 {
		t.Fatalf("a 4/min key's token opened %d sessions after the SDK's four: its rate does not hold tokens", refills+2)
	}

	r := scratchrun(t, t.TempDir(), "", "keys", "revoke", "connector", "--db", db)
	if r.code != 0 {
		t.Fatalf("keys revoke: %d %s", r.code, r.stderr)
	}
	if status, challenge := mcpInitialize(t, mcpURL, end.Tokens.AccessToken); status != 401 || !strings.Contains(challenge, `error="invalid_token"`) {
		t.Fatalf("the access token of a revoked key: %d %q", status, challenge)
	}
	if code := refreshWith(t, srv.url, end.Client.ClientID, end.Tokens.RefreshToken); code != "invalid_grant" {
		t.Fatalf("the refresh token of a revoked key: %q, want invalid_grant", code)
	}
	if code := refreshWith(t, srv.url, end.Client.ClientID, refreshed.Before); code != "invalid_grant" {
		t.Fatalf("a refresh token used once already: %q, want invalid_grant", code)
	}

	srv.stop(t)
	b.stop()
	if left := leakcheck.WaitClean(before, leakOpts, 10*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// mcpInitialize opens an MCP session with a bearer token and returns the
// status and the challenge.
func mcpInitialize(t *testing.T, mcpURL, token string) (int, string) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	req, _ := http.NewRequest(http.MethodPost, mcpURL, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("WWW-Authenticate")
}

// refreshWith asks the token endpoint for a refresh and returns the
// OAuth error code ("" on success).
func refreshWith(t *testing.T, base, clientID, refreshToken string) string {
	t.Helper()
	resp, err := http.PostForm(base+"/oauth/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken},
		"client_id": {clientID}, "resource": {base + "/mcp"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Error string `json:"error"`
	}
	json.NewDecoder(resp.Body).Decode(&out)
	if resp.StatusCode == 200 {
		return ""
	}
	return out.Error
}

// `scratchrun mcp` on a desktop, with only the server's URL, signs in to
// the built-in authorization server: it prints where to sign in, the
// person consents in a real browser with their API key, and the tool
// runs; the next start needs no browser (the grant was kept).
func TestMCPSignsInToBuiltInServer(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary and a browser")
	db := filepath.Join(t.TempDir(), "keys.db")
	apiKey := createKey(t, db, "desktop")
	srv := startServeEnv(t, []string{"SCRATCHRUN_OAUTH=builtin"}, "--db", db)
	env := []string{"SCRATCHRUN_API_URL=" + srv.url, "SCRATCHRUN_API_KEY=", "SCRATCHRUN_OAUTH_STORE=file",
		"SCRATCHRUN_OAUTH_DIR=" + filepath.Join(t.TempDir(), "oauth")}

	type session struct {
		cs     *mcp.ClientSession
		stderr *syncBuffer
		err    error
	}
	start := func(browser string) (chan session, *syncBuffer) {
		cmd := exec.Command(os.Args[0], "mcp")
		cmd.Env = append(append(os.Environ(), asCLIEnv+"=1", "BROWSER="+browser), env...)
		stderr := &syncBuffer{}
		cmd.Stderr = stderr
		done := make(chan session, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cs, err := mcp.NewClient(&mcp.Implementation{Name: "desktop", Version: "1"}, nil).
				Connect(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: 20 * time.Second}, nil)
			done <- session{cs, stderr, err}
		}()
		return done, stderr
	}
	run := func(s session) {
		t.Helper()
		if s.err != nil {
			t.Fatalf("connect to scratchrun mcp: %v (stderr %q)", s.err, s.stderr.String())
		}
		defer s.cs.Close()
		res, err := s.cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "scratchrun_exec", Arguments: map[string]any{"runtime": "bash", "code": "echo desktop-$((6*7))"}})
		if err != nil || res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "desktop-42") {
			t.Fatalf("tool call through scratchrun mcp: %v %+v (stderr %q)", err, res, s.stderr.String())
		}
	}

	done, stderr := start("true")
	var signIn string
	for deadline := time.Now().Add(90 * time.Second); signIn == ""; time.Sleep(50 * time.Millisecond) {
		if _, rest, ok := strings.Cut(stderr.String(), "scratchrun mcp: sign in at "); ok {
			signIn, _, _ = strings.Cut(rest, "\n")
		}
		if time.Now().After(deadline) {
			t.Fatalf("no sign-in line within 90 s: %q", stderr.String())
		}
	}
	if !strings.HasPrefix(signIn, srv.url+"/oauth/authorize?") {
		t.Fatalf("scratchrun mcp sends the person to %s", signIn)
	}
	b := startBrowser(t, 1000, 800)
	b.do("consent for scratchrun mcp", chromedp.Navigate(signIn), chromedp.WaitVisible(chromedp.CSS("#api_key")),
		chromedp.SendKeys(chromedp.CSS("#api_key"), apiKey), chromedp.Click(chromedp.CSS("#allow")))
	run(<-done)
	b.stop()

	// `false` as the browser: a second sign-in would fail.
	done, stderr = start("false")
	run(<-done)
	if strings.Contains(stderr.String(), "sign in at") {
		t.Errorf("the second start signed in again: %q", stderr.String())
	}
}
