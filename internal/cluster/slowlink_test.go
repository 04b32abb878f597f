package cluster_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster/frontend"
	"github.com/scratchrun/scratchrun/internal/cluster/worker"
	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/execapi/execapitest"
	"github.com/scratchrun/scratchrun/internal/testenv/natsserver"
)

// slowLink is a loopback TCP proxy to a NATS server whose direction from
// its clients to the server passes at most rate bytes a second (0:
// freely): a slow link between a worker and NATS. Its sockets' buffers
// are small, so that what is throttled waits in the client, not in the
// kernel.
type slowLink struct {
	ln     net.Listener
	target string
	rate   atomic.Int64
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// smallBuffers keeps a socket's buffers at 32 KiB (the kernel doubles it).
func smallBuffers(_, _ string, c syscall.RawConn) error {
	var err error
	c.Control(func(fd uintptr) {
		for _, opt := range []int{syscall.SO_SNDBUF, syscall.SO_RCVBUF} {
			if e := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, 32<<10); e != nil {
				err = e
			}
		}
	})
	return err
}

func startSlowLink(t *testing.T, target string) *slowLink {
	t.Helper()
	lc := net.ListenConfig{Control: smallBuffers}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &slowLink{ln: ln, target: target}
	l.wg.Add(1)
	go l.accept()
	t.Cleanup(l.close)
	return l
}

// URL is the link's client URL.
func (l *slowLink) URL() string { return "nats://" + l.ln.Addr().String() }

func (l *slowLink) accept() {
	defer l.wg.Done()
	for {
		client, err := l.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", l.target)
		if err != nil {
			client.Close()
			continue
		}
		l.mu.Lock()
		l.conns = append(l.conns, client, server)
		l.mu.Unlock()
		l.wg.Add(2)
		go func() {
			defer l.wg.Done()
			io.Copy(client, server)
			client.Close()
		}()
		go func() {
			defer l.wg.Done()
			l.throttle(server, client)
			server.Close()
		}()
	}
}

// throttle copies from to to, at most rate bytes a second.
func (l *slowLink) throttle(to, from net.Conn) {
	buf := make([]byte, 16<<10)
	for {
		n, err := from.Read(buf)
		if n > 0 {
			if rate := l.rate.Load(); rate > 0 {
				time.Sleep(time.Duration(int64(n) * int64(time.Second) / rate))
			}
			if _, werr := to.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (l *slowLink) close() {
	l.ln.Close()
	l.mu.Lock()
	for _, c := range l.conns {
		c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// A slow link between a worker and NATS while one call's result (8 MiB)
// crawls through it does not stop the worker's other calls: their beats
// are answered between the result's parts, and the call running beside
// it is not taken for lost.
func TestSlowLinkDuringOneResultSparesOtherCalls(t *testing.T) {
	ns := natsserver.Start(t, natsserver.Options{MaxPayload: 1 << 20})
	link := startSlowLink(t, ns.Server(0).Addr().String())
	eng := newEngine("bash")
	hold := make(chan struct{})
	big := base64.StdEncoding.EncodeToString(make([]byte, 6<<20))
	eng.Respond(func(_ context.Context, c execapitest.Call) execapitest.Response {
		if c.Checked.Code == "hold" {
			return execapitest.Response{Result: execapitest.Success("held\n"), Release: hold}
		}
		r := execapitest.Success("big\n")
		r.Files = map[string]string{"/tmp/big": big}
		return execapitest.Response{Result: r}
	})
	// The worker's socket keeps its buffers small too, so that the
	// result waits in the worker, where its publishing goes on, rather
	// than in the kernel, where every frame would wait behind it.
	nc, err := nats.Connect(link.URL(), nats.Name("w1"), nats.SetCustomDialer(&net.Dialer{Control: smallBuffers}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w, err := worker.Start(worker.Config{ID: "w1", Conn: nc, Engine: eng, Version: "test",
		Timing: worker.Timing{Beat: 100 * time.Millisecond, CallerLost: 5 * time.Second, GoWait: 5 * time.Second,
			KeepFinished: 10 * time.Second, Resend: 2 * time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	f := startFrontend(t, ns.URLs(), func(c *frontend.Config) {
		c.Timing = frontend.Timing{Beat: 100 * time.Millisecond, LostAfter: 2 * time.Second, GoneAfter: 2 * time.Second,
			ReadyWait: 2 * time.Second, LiveWindow: 3 * time.Second}
	})
	waitWorkers(t, f, "w1")

	held := make(chan error, 1)
	go func() {
		res, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "hold"}, nil)
		if err == nil && res.Stdout != "held\n" {
			err = errors.New("the held call's result came wrong")
		}
		held <- err
	}()
	waitFor(t, "the held call to run", func() bool { return eng.InFlight() == 1 })
	link.rate.Store(2 << 20) // 2 MiB/s: the result takes about 4 s
	start := time.Now()
	res, _, err := exec(f, execapi.Request{Runtime: "bash", Code: "big", ReturnFiles: []string{"/tmp/big"}}, nil)
	if err != nil || res.Files["/tmp/big"] != big {
		t.Fatalf("the large result over the slow link: %v", err)
	}
	took := time.Since(start)
	select {
	case err := <-held:
		t.Fatalf("the call beside the large result ended while it crawled through (%s): %v", took.Round(time.Millisecond), detail(err))
	default:
	}
	link.rate.Store(0)
	close(hold)
	if err := <-held; err != nil {
		t.Fatalf("the call beside the large result: %v", detail(err))
	}
	if took < 2*time.Second {
		t.Errorf("8 MiB passed the slow link in %s: it was not throttled, and the test showed nothing", took)
	}
}

// detail is err's account, with how a lost worker was seen to be lost.
func detail(err error) string {
	var lost *execapi.WorkerLostError
	if errors.As(err, &lost) {
		return lost.Detail()
	}
	return fmt.Sprint(err)
}
