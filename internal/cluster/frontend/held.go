package frontend

import (
	"sync/atomic"

	"github.com/nats-io/nats.go"

	"github.com/scratchrun/scratchrun/internal/cluster"
	"github.com/scratchrun/scratchrun/internal/execapi"
)

// What a worker's answers may make a front end hold. A worker host may be
// taken over (the NATS permissions exist to contain one), so nothing it
// sends, neither the numbers in its headers nor how many frames it holds
// back out of order, may size an allocation or a buffer: each call holds at
// most what its result can weigh, and a call that would hold more ends as
// lost with a malformed answer.
const (
	// DefaultMaxResultBytes bounds a result's JSON whatever a worker says
	// its caps are: the defaults' worst case (1 MiB of output each way,
	// escaped, and 10 MiB of return files in base64) is about 26 MiB.
	DefaultMaxResultBytes = 64 << 20
	// jsonWorst is how long one byte of output can grow in JSON: \u00XX,
	// or \ufffd for a byte that is no UTF-8.
	jsonWorst = 6
	// resultOverhead is room for the rest of a result: exit code, note,
	// facts, keys.
	resultOverhead = 64 << 10
	// frameOverhead is what a held frame costs beyond its body and
	// headers (the message's own bookkeeping), so that empty frames
	// count too.
	frameOverhead = 256
)

// resultLimit is the most the JSON of w's result for req may weigh: its
// output caps (stdout and stderr, each, escaped at worst), its return
// files in base64 when req asks for any, and room for the rest. The caps
// are the worker's own claim, so the front end's MaxResultBytes bounds
// them.
func (f *Frontend) resultLimit(w cluster.Registration, req execapi.Request) int64 {
	ceiling := f.cfg.MaxResultBytes
	out := int64(w.OutputLimitBytes)
	if out <= 0 || out > ceiling {
		return ceiling
	}
	n := 2*jsonWorst*out + resultOverhead
	if len(req.ReturnFiles) > 0 {
		ret := w.MaxReturnBytes
		if ret <= 0 || ret > ceiling {
			return ceiling
		}
		n += (ret + 2) / 3 * 4
		for _, p := range req.ReturnFiles {
			// Each path is a key of files and may be named again in the
			// facts, the sandbox's notes and the note (missing, too
			// large), each time with a sentence around it.
			n += 4 * (jsonWorst*int64(len(p)) + 128)
		}
	}
	return min(n, ceiling)
}

// heldLimit is the most a call may hold of its worker's answers at once:
// its result, as much again for frames that came out of order (events
// before a lost one, say), and a frame or two in the mailbox.
func (f *Frontend) heldLimit(resultLimit int64) int64 {
	return 2*resultLimit + 2*(f.nc.MaxPayload()+cluster.HeaderReserve)
}

// budget is what one call may hold of its worker's answers, shared by its
// mailbox (filled by NATS's goroutine) and the call's own goroutine.
type budget struct {
	limit int64
	held  atomic.Int64
	total *heldBytes
}

// take counts n more bytes held, unless that would exceed the limit.
func (b *budget) take(n int64) bool {
	if b.held.Add(n) > b.limit {
		b.held.Add(-n)
		return false
	}
	b.total.add(n)
	return true
}

// give counts n bytes no longer held.
func (b *budget) give(n int64) {
	b.held.Add(-n)
	b.total.add(-n)
}

// heldBytes is what all calls of a front end hold, and the most they held
// at once.
type heldBytes struct {
	now, peak atomic.Int64
}

func (h *heldBytes) add(n int64) {
	v := h.now.Add(n)
	for {
		p := h.peak.Load()
		if v <= p || h.peak.CompareAndSwap(p, v) {
			return
		}
	}
}

// Held is what the calls in flight hold now of their workers' answers
// (answers not yet read, frames out of order, parts of results), and the
// most they held at once since the front end started. Each call's share
// is bounded by what its result may weigh, whatever its worker sends.
func (f *Frontend) Held() (now, peak int64) {
	return f.held.now.Load(), f.held.peak.Load()
}

// msgCost is what holding m costs: its body, headers and subjects.
func msgCost(m *nats.Msg) int64 {
	n := int64(len(m.Data)+len(m.Subject)+len(m.Reply)) + frameOverhead
	for k, vs := range m.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}
