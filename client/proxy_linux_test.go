//go:build linux

package client_test

import (
	"io"
	"net"
	"strings"
	"sync"
	"testing"
)

// dropProxy forwards loopback connections to a server, and cuts the first
// one at the first byte the server answers: a connection lost after the
// request went out, with the run begun (or, for an answer that comes only
// at its end, over).
type dropProxy struct {
	url   string
	mu    sync.Mutex
	conns int
	open  []net.Conn
}

func startDropProxy(t *testing.T, target string) *dropProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &dropProxy{url: "http://" + ln.Addr().String()}
	addr := strings.TrimPrefix(target, "http://")
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		// The client keeps its last connection for reuse: end it, both
		// sides.
		p.mu.Lock()
		for _, c := range p.open {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns++
			p.open = append(p.open, c)
			first := p.conns == 1
			p.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.forward(c, addr, first)
			}()
		}
	}()
	return p
}

// forward copies c to the server and back; first: the answer's first byte
// closes both instead.
func (p *dropProxy) forward(c net.Conn, addr string, first bool) {
	defer c.Close()
	s, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer s.Close()
	p.mu.Lock()
	p.open = append(p.open, s)
	p.mu.Unlock()
	go io.Copy(s, c)
	if first {
		var b [1]byte
		io.ReadFull(s, b[:])
		return
	}
	io.Copy(c, s)
}

// connections is how many connections the proxy took.
func (p *dropProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.conns
}
