package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

func TestValidationFromMessage(t *testing.T) {
	cases := []struct{ msg, field, rest string }{
		{"limits.timeout_ms: is 99999; it must be between 1 and 30000", "limits.timeout_ms", "is 99999; it must be between 1 and 30000"},
		{"return_files[2]: path \"x\" is relative", "return_files[2]", "path \"x\" is relative"},
		{`files["/tmp/a: b"]: path is under /proc`, `files["/tmp/a: b"]`, "path is under /proc"},
		{`env["A\"B"]: is not a valid variable name`, `env["A\"B"]`, "is not a valid variable name"},
		{"body: is not valid JSON (at byte 3): x: y", "body", "is not valid JSON (at byte 3): x: y"},
		{"something went wrong", "request", "something went wrong"},
		{`files["unterminated: x`, "request", `files["unterminated: x`},
		{"", "request", ""},
	}
	for _, c := range cases {
		v := validationFromMessage(c.msg)
		if v.Field != c.field || v.Message != c.rest {
			t.Errorf("%q -> field %q message %q; want %q, %q", c.msg, v.Field, v.Message, c.field, c.rest)
		}
	}
}

// The field the server names survives the trip through the message for any
// path a request can name.
func FuzzValidationFieldRoundTrip(f *testing.F) {
	f.Add("/tmp/a: b", "is bad")
	f.Add("\x00\"]: ", ": ")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, path, msg string) {
		for _, field := range []string{fmt.Sprintf("files[%q]", path), fmt.Sprintf("files_base64[%q]", path), fmt.Sprintf("env[%q]", path)} {
			v := validationFromMessage((&execapi.ValidationError{Field: field, Message: msg}).Error())
			if v.Field != field || v.Message != msg {
				t.Fatalf("field %q message %q came back as %q, %q", field, msg, v.Field, v.Message)
			}
		}
		validationFromMessage(path + msg) // never panics
	})
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	for v, want := range map[string]time.Duration{
		"":                              0,
		"7":                             7 * time.Second,
		"-1":                            0,
		"soon":                          0,
		"Wed, 01 Jan 2025 12:00:30 GMT": 30 * time.Second,
		"Wed, 01 Jan 2025 11:00:00 GMT": 0,
	} {
		if got := parseRetryAfter(v, now); got != want {
			t.Errorf("Retry-After %q = %s, want %s", v, got, want)
		}
	}
}

// Network failures name the URL, never the key; answers that are not the
// API's error document still become an *APIError.
func TestClientErrorsNeverShowTheKey(t *testing.T) {
	const key = "sr_live_SECRETSECRETSECRETSECRETSECRETSECRETSECRETS"
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close() // nothing listens here now
	c := New("http://user:pw@"+addr, key)
	_, err := c.Run(context.Background(), Request{Runtime: "bash", Code: "true"})
	if err == nil || strings.Contains(err.Error(), key) || strings.Contains(err.Error(), "pw@") || !strings.Contains(err.Error(), addr) {
		t.Errorf("network error: %v", err)
	}
	if !strings.Contains(err.Error(), "refused") || !errors.Is(err, ErrConnectionLost) {
		t.Errorf("network error lost its cause: %v", err)
	}

	// A proxy's page instead of the API's document.
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+key {
			t.Errorf("Authorization header %q", r.Header.Get("Authorization"))
		}
		w.Header().Set("Retry-After", "3")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, "<html>slow down</html>")
	})}
	ln, _ = net.Listen("tcp", "127.0.0.1:0")
	go srv.Serve(ln)
	defer srv.Close()
	c = New("http://"+ln.Addr().String(), key, WithoutRetries())
	_, err = c.Run(context.Background(), Request{Runtime: "bash", Code: "true"})
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 429 || ae.Code != execapi.CodeAtCapacity || ae.RetryAfter != 3*time.Second ||
		!errors.Is(err, execapi.ErrAtCapacity) || !strings.Contains(ae.Message, "slow down") || strings.Contains(err.Error(), key) {
		t.Errorf("proxy 429: %#v (%v)", ae, err)
	}
	// A cancelled context is reported as such.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Runtimes(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Describe: %v", err)
	}
}

// From a server that names no reason in its error document (one older than
// reasons), a 429's code still says which refusal it was; a 503 may have
// ended a run that had begun, so it stays an *APIError.
func TestClientReadsRefusalsWithoutAReason(t *testing.T) {
	status, body := 0, ""
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "7")
		w.WriteHeader(status)
		fmt.Fprint(w, body)
	}))
	defer srv.Close()
	c := New(srv.URL, "", WithoutRetries())
	status, body = 429, `{"error":{"code":"rate_limited","message":"this API key's limit of 2 runs per minute is used up; retry after 7 s"}}`
	_, err := c.Run(context.Background(), Request{Runtime: "bash", Code: "true"})
	var r *execapi.Refusal
	if !errors.As(err, &r) || r.Reason != execapi.RefusedKeyRate || r.RetryAfter != 7*time.Second {
		t.Errorf("429 rate_limited: %#v", err)
	}
	status, body = 503, `{"error":{"code":"draining","message":"the server shut down before the run finished; its sandbox was killed"}}`
	_, err = c.Run(context.Background(), Request{Runtime: "bash", Code: "true"})
	var ae *APIError
	if errors.As(err, &r) || !errors.As(err, &ae) || ae.Status != 503 {
		t.Errorf("503 draining: %#v", err)
	}
}
