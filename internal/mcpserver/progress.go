package mcpserver

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

const (
	// progressTailBytes is how much recent output a progress reporter keeps.
	progressTailBytes = 4 << 10
	// progressMessageLines and progressMessageBytes bound the output shown in
	// one progress message: clients show it as a status line, not a log.
	progressMessageLines = 5
	progressMessageBytes = 400
)

// progressReporter sends notifications/progress for one call while its code
// runs: elapsed time as progress, and a message with the latest output.
// Events arrive on the run's goroutines and only update state; a ticker of
// its own sends, so a slow client never slows the run.
type progressReporter struct {
	ctx      context.Context
	session  *mcp.ServerSession
	token    any
	start    time.Time
	limit    time.Duration
	interval time.Duration

	mu      sync.Mutex
	started bool
	// remote says a remote server runs the call and reports nothing until
	// the result, so all that is known is the wait.
	remote   bool
	tail     []byte
	outBytes int64
	last     float64

	done chan struct{}
	wg   sync.WaitGroup
}

func startProgress(ctx context.Context, session *mcp.ServerSession, token any, interval, limit time.Duration) *progressReporter {
	p := &progressReporter{ctx: ctx, session: session, token: token, start: time.Now(), limit: limit,
		interval: interval, done: make(chan struct{})}
	p.wg.Add(1)
	go p.loop()
	return p
}

// observe is the run's EventSink; it must return quickly.
func (p *progressReporter) observe(ev execapi.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch ev.Kind {
	case execapi.EventStarted:
		p.started = true
	case execapi.EventSubmitted:
		p.remote = true
	case execapi.EventStdout, execapi.EventStderr:
		p.started = true
		p.outBytes += int64(len(ev.Data))
		p.tail = append(p.tail, ev.Data...)
		if over := len(p.tail) - progressTailBytes; over > 0 {
			p.tail = append(p.tail[:0], p.tail[over:]...)
		}
	}
}

// stop ends the reporter and waits until it can send nothing more, so that
// no progress notification follows the call's result.
func (p *progressReporter) stop() {
	close(p.done)
	p.wg.Wait()
}

func (p *progressReporter) loop() {
	defer p.wg.Done()
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-p.ctx.Done():
			return
		case <-tick.C:
			params := p.next()
			// A failed send (client gone) is not the run's problem.
			_ = p.session.NotifyProgress(p.ctx, params)
		}
	}
}

// next builds the next notification; progress strictly increases, as the
// protocol requires.
func (p *progressReporter) next() *mcp.ProgressNotificationParams {
	p.mu.Lock()
	defer p.mu.Unlock()
	elapsed := time.Since(p.start)
	progress := math.Round(elapsed.Seconds()*10) / 10
	if progress <= p.last {
		progress = p.last + 0.001
	}
	p.last = progress
	var msg string
	switch {
	case p.remote && !p.started:
		msg = fmt.Sprintf("Waiting for the server (%.1f s)", elapsed.Seconds())
	case !p.started:
		msg = fmt.Sprintf("Starting a sandbox (%.1f s)", elapsed.Seconds())
	case p.outBytes == 0:
		msg = fmt.Sprintf("Running for %.1f s (limit %.1f s); no output yet", elapsed.Seconds(), p.limit.Seconds())
	default:
		msg = fmt.Sprintf("Running for %.1f s (limit %.1f s); %d bytes of output so far, latest:\n%s",
			elapsed.Seconds(), p.limit.Seconds(), p.outBytes, lastLines(p.tail))
	}
	return &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: progress, Message: msg}
}

// lastLines returns the last few non-empty lines of out, bounded in size and
// valid UTF-8.
func lastLines(out []byte) string {
	out = bytes.TrimRight(out, "\n")
	lines := strings.Split(strings.ToValidUTF8(string(out), "\uFFFD"), "\n")
	if len(lines) > progressMessageLines {
		lines = lines[len(lines)-progressMessageLines:]
	}
	s := strings.Join(lines, "\n")
	if len(s) > progressMessageBytes {
		cut := len(s) - progressMessageBytes
		for cut < len(s) && !utf8.RuneStart(s[cut]) {
			cut++
		}
		s = "…" + s[cut:]
	}
	return s
}
