package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A client that sends a body over the limit, declared by its length, reads
// the 413: the server reads and drops the body first, so that it does not
// close with unread bytes (which makes the kernel reset the connection
// under a client still writing; Node's fetch then reported a lost
// connection instead of the answer).
func TestBodyOverTheLimitIsAnsweredNotReset(t *testing.T) {
	ts := startServer(t, serverOptions{maxBody: 1 << 20, fake: scripted()})
	_, key := ts.key("alice", 1000, 4)
	addr := strings.TrimPrefix(ts.URL, "http://")
	body := bytes.Repeat([]byte("x"), 24<<20)
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(60 * time.Second))
	head := fmt.Sprintf("POST /v1/exec HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", addr, key, len(body))
	if _, err := conn.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Write(body); err != nil {
		t.Fatalf("writing the body over the limit: %v (the server reset the connection)", err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("status %d, want 413", resp.StatusCode)
	}
}
