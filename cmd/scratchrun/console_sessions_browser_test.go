//go:build linux

package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/scratchrun/scratchrun/internal/console"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/httpapi"
	"github.com/scratchrun/scratchrun/internal/store"
	"github.com/scratchrun/scratchrun/internal/testenv"
)

// The console's Sessions page in Chromium: the store's open sessions are
// listed with their key, and End (two steps) asks through the row; the
// page passes the Content-Security-Policy and throws nothing. The server
// is in this process (the console over a scripted service), as `scratchrun
// serve` does not offer sessions yet; it runs no sandbox.
func TestConsoleSessionsPageInBrowser(t *testing.T) {
	testenv.SkipIfShort(t, "drives chromium")
	ctx := context.Background()
	keys, err := store.Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	k, _, err := keys.CreateKey(ctx, store.NewKey{Name: "session-agent", RatePerMin: 60, Concurrency: 1})
	if err != nil {
		t.Fatal(err)
	}
	id := execapi.NewSessionID()
	hash := store.HashSessionID(id)
	now := time.Now()
	if err := keys.InsertCodeSession(ctx, store.CodeSession{IDHash: hash, Owner: k.ID, Server: "h/e1_1", Runtime: "python3.13",
		Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Token: browserConsoleToken, Keys: keys, Sessions: keys})
	if err != nil {
		t.Fatal(err)
	}
	fake := execapitest.New("bash")
	srv, err := httpapi.New(httpapi.Config{Service: fake, Policy: fake.Policy(), Keys: keys, Console: con.Mount})
	if err != nil {
		t.Fatal(err)
	}
	base := testenv.ServeLoopback(t, srv.Serve)

	b := startBrowser(t, 1280, 900)
	b.do("sign in",
		chromedp.Navigate(base+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserConsoleToken),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS(`#nav a[data-page="sessions"]`)))
	row := `#sessions-table tr[data-session-hash="` + hash + `"]`
	b.do("open sessions",
		consolePage(base, "sessions"),
		chromedp.WaitVisible(chromedp.CSS(row)))
	if text := b.text(row); !strings.Contains(text, hash[:12]) || !strings.Contains(text, "session-agent") || !strings.Contains(text, "python3.13") {
		t.Errorf("the session's row: %q", text)
	}
	if strings.Contains(b.text("#sessions-table"), id) {
		t.Error("the page shows the session's id")
	}
	b.shot("11-sessions")
	b.do("end the session",
		chromedp.Click(chromedp.CSS(row+` button[data-action="end"]`)),
		chromedp.Click(chromedp.CSS(row+` button[data-action="confirm-end"]`)),
		chromedp.WaitVisible(chromedp.CSS("#flash.ok")))
	if msg := b.text("#flash"); !strings.Contains(msg, "ends within 2 s") {
		t.Errorf("after End: %q", msg)
	}
	if c, err := keys.CodeSession(ctx, hash); err != nil || !c.EndRequested {
		t.Errorf("the row after End: %+v, %v", c, err)
	}

	// Without sessions, the page is not offered and nothing is wrong.
	off, err := console.New(console.Config{Token: browserConsoleToken, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	offSrv, err := httpapi.New(httpapi.Config{Service: fake, Policy: fake.Policy(), Keys: keys, Console: off.Mount})
	if err != nil {
		t.Fatal(err)
	}
	offBase := testenv.ServeLoopback(t, offSrv.Serve)
	b.do("sign in without sessions",
		chromedp.Navigate(offBase+"/console/"),
		chromedp.WaitVisible(chromedp.CSS("#signin-form")),
		chromedp.SendKeys(chromedp.CSS("#token"), browserConsoleToken),
		chromedp.Click(chromedp.CSS("#signin-submit")),
		chromedp.WaitVisible(chromedp.CSS("#keys-table tbody tr")))
	if shown := eval[bool](b, `!document.querySelector('#nav a[data-page="sessions"]').hidden || !document.getElementById("flash").hidden`); shown {
		t.Errorf("without sessions the console shows the Sessions link or an error: %q", b.text("#flash"))
	}
	b.checkProblems()
}
