package main

import (
	"context"
	"fmt"
	"html"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/scratchrun/scratchrun/internal/leakcheck"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// The web console in a real browser: Debian's chromium, headless, driven
// over the DevTools protocol (chromedp), against `scratchrun serve` on the
// real engine. Screenshots of each page go to the artifacts directory
// (consoleArtifacts).

// chromiumPath is Debian's chromium (scripts/test.sh installs it);
// SCRATCHRUN_CHROMIUM names another.
func chromiumPath() string {
	return firstNonEmpty(os.Getenv("SCRATCHRUN_CHROMIUM"), "/usr/bin/chromium")
}

// consoleArtifacts is where the screenshots go: SCRATCHRUN_TEST_ARTIFACTS,
// else test-artifacts/console at the top of the checkout (ignored by git).
func consoleArtifacts(t *testing.T) string {
	dir := os.Getenv("SCRATCHRUN_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", "test-artifacts")
	}
	dir = filepath.Join(dir, "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// browserSession is one headless chromium and what it reported.
type browserSession struct {
	t   *testing.T
	ctx context.Context
	dir string
	// stop ends chromium (and waits for it to go).
	stop func()

	mu       sync.Mutex
	problems []string // script exceptions and policy violations
}

func startBrowser(t *testing.T, width, height int) *browserSession {
	t.Helper()
	if _, err := os.Stat(chromiumPath()); err != nil {
		t.Fatalf("chromium is needed for the console's browser tests (scripts/test.sh installs Debian's): %v", err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		// Without these Chromium reaches out to Google's services, which
		// this machine's closed network refuses.
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(width, height),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(allocCtx)
	b := &browserSession{t: t, ctx: ctx, dir: consoleArtifacts(t)}
	b.stop = sync.OnceFunc(func() {
		cancel()
		cancelAlloc() // stops chromium and waits for it
	})
	t.Cleanup(b.stop)
	if err := chromedp.Listen(ctx, b.watch); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// watch keeps what the page must never produce: uncaught exceptions and
// Content-Security-Policy violations (which would mean the page needs
// what the policy forbids).
func (b *browserSession) watch(ev any) {
	var problem string
	switch e := ev.(type) {
	case *runtime.EventExceptionThrown:
		problem = "exception: " + e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			problem += " " + e.ExceptionDetails.Exception.Description
		}
	case *log.EventEntryAdded:
		if strings.Contains(e.Entry.Text, "Content Security Policy") {
			problem = "policy violation: " + e.Entry.Text
		}
	case *runtime.EventConsoleAPICalled:
		for _, a := range e.Args {
			if strings.Contains(string(a.Value), "Content Security Policy") {
				problem = "policy violation: " + string(a.Value)
			}
		}
	}
	if problem != "" {
		b.mu.Lock()
		b.problems = append(b.problems, problem)
		b.mu.Unlock()
	}
}

func (b *browserSession) checkProblems() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("in the browser: %s", p)
	}
	b.problems = nil
}

// do runs steps, failing the test with what the step was for.
func (b *browserSession) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 3*time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.shot("failed-" + strings.ReplaceAll(what, " ", "-"))
		b.t.Fatalf("%s: %v", what, err)
	}
}

// text reads an element's text.
func (b *browserSession) text(sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return s
}

// eval evaluates JavaScript (awaiting a promise) in the page.
func eval[T any](b *browserSession, js string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", js, err)
	}
	return v
}

// waitLoaded waits until the tab holds a loaded document under prefix:
// after a navigation a page starts (a form post), which no action waits
// for, and during which evaluating fails.
func (b *browserSession) waitLoaded(prefix string) {
	b.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`location.href.startsWith(`+jsString(prefix)+`) && document.readyState === "complete"`))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			b.t.Fatalf("no page of %s loaded: %v", prefix, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shot saves a full-page screenshot as name.png.
func (b *browserSession) shot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Errorf("screenshot %s: %v", name, err)
		return
	}
	path := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		b.t.Errorf("save screenshot: %v", err)
	}
}

// sessionCookies are the console's cookies the browser holds for url.
func (b *browserSession) sessionCookies(url string) []string {
	b.t.Helper()
	res, err := chromedp.Call(b.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url + "/console/"}})
	if err != nil {
		b.t.Fatal(err)
	}
	var names []string
	for _, c := range res.Cookies {
		if c.Name == "scratchrun_console" {
			names = append(names, fmt.Sprintf("%s HttpOnly=%v SameSite=%s", c.Name, c.HTTPOnly, c.SameSite))
		}
	}
	return names
}

const browserConsoleToken = "console-token-for-the-browser-test"

// Sign in, make a key and use it, revoke it, run the README's chart in the
// playground, look at usage and live state, on a laptop's screen and a
// phone's; and see that a wrong token, a request without its CSRF token
// and a cross-site form post are refused.
func TestConsoleInBrowser(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	before := leakcheck.Take(leakOpts)
	db := filepath.Join(t.TempDir(), "keys.db")
	p := startServeEnv(t, []string{"SCRATCHRUN_CONSOLE_TOKEN=" + browserConsoleToken}, "--db", db)
	keys, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	b := startBrowser(t, 1280, 900)
	base := p.url

	// A wrong token is refused, with no session.
	b.do("open the console",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")))
	b.shot("01-signin")
	b.do("sign in with a wrong token",
		chromedp.SendKeys(chromedp.CSS("#token"), "not-the-console-token-at-all"),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#signin-error")))
	if msg := b.text("#signin-error"); !strings.Contains(msg, "not the operator token") {
		t.Errorf("wrong token: %q", msg)
	}
	if c := b.sessionCookies(base); len(c) != 0 {
		t.Errorf("a wrong token got a session: %v", c)
	}
	b.shot("02-signin-wrong-token")

	b.do("sign in",
		chromedp.SendKeys(chromedp.CSS("#token"), browserConsoleToken),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#page-keys")))
	if c := b.sessionCookies(base); len(c) != 1 || !strings.Contains(c[0], "HttpOnly=true SameSite=Strict") {
		t.Errorf("session cookie: %v", c)
	}
	b.shot("03-keys-empty")

	// A key made in the console works against the API until revoked there.
	b.do("create a key",
		chromedp.SendKeys(chromedp.CSS("#key-name"), "browser-agent"),
		chromedp.Click(chromedp.CSS("#key-create-submit")),
		chromedp.WaitVisible(chromedp.CSS("#key-created")),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-key-name="browser-agent"]`)))
	secret := strings.TrimSpace(b.text("#key-secret"))
	if !keyLine.MatchString(secret) {
		t.Fatalf("the new key shown is %q", secret)
	}
	if snippets := b.text("#key-snippets"); !strings.Contains(snippets, base+"/mcp") || !strings.Contains(snippets, "Bearer "+secret) {
		t.Errorf("the snippets do not name this server and key:\n%s", snippets)
	}
	b.shot("04-key-created")
	status, body, err := httpCall(http.MethodPost, base+"/v1/exec", secret, `{"runtime": "bash", "code": "echo from-the-new-key"}`)
	if err != nil || status != http.StatusOK || !strings.Contains(body, `"stdout":"from-the-new-key\n"`) {
		t.Fatalf("the new key against /v1/exec: %d %s %v", status, body, err)
	}
	b.do("revoke the key",
		chromedp.Click(chromedp.CSS("#key-created-close")),
		chromedp.Click(chromedp.CSS(`tr[data-key-name="browser-agent"] button[data-action="revoke"]`)),
		chromedp.Click(chromedp.CSS(`tr[data-key-name="browser-agent"] button[data-action="confirm-revoke"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr.revoked[data-key-name="browser-agent"]`)))
	if status, body, _ := httpCall(http.MethodPost, base+"/v1/exec", secret, `{"runtime": "bash", "code": "true"}`); status != http.StatusUnauthorized {
		t.Errorf("the revoked key against /v1/exec: %d %s", status, body)
	}
	b.shot("05-key-revoked")

	// A state-changing request without the CSRF token, from the console's
	// own page with its session cookie, changes nothing.
	if status := eval[int](b, `fetch("/console/api/keys", {method: "POST", headers: {"Content-Type": "application/json"},
		body: JSON.stringify({name: "no-csrf"})}).then(r => r.status)`); status != http.StatusForbidden {
		t.Errorf("POST without the CSRF token: %d", status)
	}

	// A page of another site (localhost is another site than 127.0.0.1)
	// posts a form to the console: refused, nothing made.
	evil := startCrossSitePage(t, base+"/console/api/keys", [][2]string{{"name", "evil"}, {"rate_per_min", "1000"}})
	b.do("a cross-site form post",
		chromedp.Navigate(evil),
		chromedp.WaitVisible(chromedp.CSS("#evil-form")),
		chromedp.Click(chromedp.CSS("#evil-submit")))
	b.waitLoaded(base)
	if text := b.text("body"); !strings.Contains(text, "forbidden") {
		t.Errorf("the cross-site post was answered: %s", text)
	}
	b.shot("06-cross-site-refused")
	for _, k := range must(keys.ListKeys(context.Background()))(t) {
		if k.Name != "browser-agent" {
			t.Errorf("a refused request made the key %q", k.Name)
		}
	}

	// The README's chart example in the playground: its image is shown.
	chart, err := os.ReadFile("../../examples/chart.py")
	if err != nil {
		t.Fatal(err)
	}
	b.do("open the playground",
		consolePage(base, "playground"),
		chromedp.WaitVisible(chromedp.CSS("#page-playground")),
		chromedp.WaitReady(chromedp.CSS(`#run-runtime option[value="python3.13"]`)),
		chromedp.SetValue(chromedp.CSS("#run-runtime"), "python3.13"),
		chromedp.SetValue(chromedp.CSS("#run-code"), string(chart)),
		chromedp.Click(chromedp.CSS("#run-more summary")),
		chromedp.SetValue(chromedp.CSS("#run-return"), "/tmp/chart.png"),
		chromedp.Click(chromedp.CSS("#run-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#run-images img[data-path="/tmp/chart.png"]`)))
	if w := eval[int](b, `new Promise(r => { const i = document.querySelector("#run-images img"); i.complete ? r(i.naturalWidth) : i.onload = () => r(i.naturalWidth); })`); w != 600 {
		t.Errorf("the chart shown is %d pixels wide, want 600 (6 in at 100 dpi)", w)
	}
	if out := b.text("#run-stdout"); !strings.Contains(out, "mean of damped wave") {
		t.Errorf("playground stdout: %q", out)
	}
	if code := b.text(`[data-tile="exit-code"] .value`); code != "0" {
		t.Errorf("playground exit code %q", code)
	}
	b.shot("07-playground-chart")

	// Usage shows both runs (the key's and the console's); the CSV holds
	// them.
	b.do("open usage",
		consolePage(base, "usage"),
		chromedp.WaitVisible(chromedp.CSS("#usage-runs tbody tr[data-outcome]")),
		chromedp.WaitVisible(chromedp.CSS("#runs-chart")))
	if runs := b.text(`[data-tile="runs"] .value`); runs != "2" {
		t.Errorf("usage shows %s runs, want 2", runs)
	}
	table := b.text("#usage-runs")
	if !strings.Contains(table, "browser-agent") || !strings.Contains(table, "console (playground)") {
		t.Errorf("recent runs:\n%s", table)
	}
	csv := eval[string](b, `fetch(document.getElementById("usage-csv").href).then(r => r.text())`)
	if lines := strings.Split(strings.TrimSpace(csv), "\n"); len(lines) != 3 || !strings.Contains(csv, ",console,") || !strings.Contains(csv, "browser-agent") {
		t.Errorf("CSV export:\n%s", csv)
	}
	b.shot("08-usage")

	b.do("open live",
		consolePage(base, "live"),
		chromedp.WaitVisible(chromedp.CSS(`#live-tiles [data-tile="capacity"]`)))
	// The engine's admission, as /metrics has it: by resources, with the
	// memory budget in force.
	if text := b.text("#live-admission"); !strings.Contains(text, "by resources") || !strings.Contains(text, "Memory used / reserved / budget") {
		t.Errorf("live admission:\n%s", text)
	}
	b.shot("09-live")

	// A phone's screen: every page fits its width.
	filled := map[string]string{
		"keys": "#keys-table tbody tr[data-key-id]", "usage": "#usage-runs tbody tr[data-outcome]",
		"live": "#live-tiles .tile", "playground": "#run-runtime option",
	}
	for _, page := range []string{"keys", "usage", "live", "playground"} {
		b.do("open "+page+" on a phone",
			chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
			consolePage(base, page),
			chromedp.WaitVisible(chromedp.CSS("#page-"+page)),
			chromedp.WaitReady(chromedp.CSS(filled[page])))
		if overflow := eval[int](b, `document.documentElement.scrollWidth - window.innerWidth`); overflow > 1 {
			t.Errorf("%s is %d pixels wider than a phone's screen", page, overflow)
		}
		b.shot("10-phone-" + page)
	}

	b.do("sign out",
		chromedp.Click(chromedp.CSS("#signout")),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")),
		consolePage(base, "keys"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")))
	b.checkProblems()
	b.stop()
	t.Logf("screenshots in %s", b.dir)
	if !strings.Contains(p.stderr(), "web console at "+base+"/console") {
		t.Errorf("serve does not say where the console is:\n%s", p.stderr())
	}

	p.stop(t)
	if left := leakcheck.WaitClean(before, leakOpts, 5*time.Second); len(left) > 0 {
		t.Errorf("left behind:\n  %s", strings.Join(left, "\n  "))
	}
}

// startCrossSitePage serves, on another port and under the name
// localhost (another site than 127.0.0.1), a page with a form of these
// fields that posts to target, as a page of an attacker would.
func startCrossSitePage(t *testing.T, target string, fields [][2]string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var inputs strings.Builder
	for _, f := range fields {
		fmt.Fprintf(&inputs, `<input name="%s" value="%s">`, html.EscapeString(f[0]), html.EscapeString(f[1]))
	}
	page := `<!doctype html><title>evil</title><form id="evil-form" method="post" action="` + html.EscapeString(target) + `">
` + inputs.String() + `
<button id="evil-submit" type="submit">go</button></form>`
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, page)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return fmt.Sprintf("http://localhost:%d/", ln.Addr().(*net.TCPAddr).Port)
}

// consolePage loads a page of the console afresh: the query makes it a
// new document (a change of the hash alone would not load, and Navigate
// would wait for a load that never comes).
func consolePage(base, page string) chromedp.Action[chromedp.Void] {
	return chromedp.Navigate(base + "/console/?page=" + page + "#" + page)
}

func jsString(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}

func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
