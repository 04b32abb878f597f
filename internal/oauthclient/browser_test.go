package oauthclient

import (
	"fmt"
	"slices"
	"testing"
)

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// The opener per OS, and $BROWSER over it; the URL, & and all, is always
// one argument (no shell splits it).
func TestOpenerCommand(t *testing.T) {
	const u = "https://as.example/authorize?client_id=c&state=s&code_challenge=x"
	for _, c := range []struct {
		goos, browser string
		want          []string
	}{
		{"darwin", "", []string{"open", u}},
		{"windows", "", []string{"rundll32", "url.dll,FileProtocolHandler", u}},
		{"linux", "", []string{"xdg-open", u}},
		{"freebsd", "", []string{"xdg-open", u}},
		{"linux", "firefox", []string{"firefox", u}},
		{"darwin", "chromium --headless %s:firefox", []string{"chromium", "--headless", u}},
		{"windows", "  ", []string{"rundll32", "url.dll,FileProtocolHandler", u}},
	} {
		name, args := openerCommand(c.goos, c.browser, u)
		if got := append([]string{name}, args...); !slices.Equal(got, c.want) {
			t.Errorf("GOOS=%s BROWSER=%q: %q; want %q", c.goos, c.browser, got, c.want)
		}
	}
}
