package httpapi

import (
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// A client that reads slower than the code writes: the sink never blocks
// and drops nothing; up to the buffer each chunk is its own event, in the
// order written, and beyond it chunks join the latest waiting event of
// their stream, so that what waits stops growing in events and each
// stream's text stays whole and in order.
func TestEventQueueCoalescesBeyondItsBuffer(t *testing.T) {
	const limit = 4 * (pendingOverhead + 10)
	q := newEventQueue(limit)
	q.push(execapi.Event{Kind: execapi.EventStarted}, 0)
	var out, errs strings.Builder
	for i := range 1000 {
		kind, b := execapi.EventStdout, &out
		if i%3 == 2 {
			kind, b = execapi.EventStderr, &errs
		}
		chunk := []byte{byte('a' + i%26)}
		b.Write(chunk)
		q.push(execapi.Event{Kind: kind, Data: chunk}, 0)
		chunk[0] = '!' // the sender reuses its buffer
	}
	evs, admitted := q.take()
	// The buffer holds started and three chunks (a, b, c) as they came;
	// the rest joined b (stdout) and c (stderr).
	if !admitted || len(evs) != 4 || evs[0].kind != execapi.EventStarted || string(evs[1].data) != "a" ||
		evs[2].kind != execapi.EventStdout || evs[2].data[0] != 'b' || evs[3].kind != execapi.EventStderr || evs[3].data[0] != 'c' {
		t.Fatalf("admitted %v, %d events waiting: %+v", admitted, len(evs), evs)
	}
	var gotOut, gotErr strings.Builder
	for _, ev := range evs[1:] {
		if ev.kind == execapi.EventStdout {
			gotOut.Write(ev.data)
		} else {
			gotErr.Write(ev.data)
		}
	}
	if gotOut.String() != out.String() || gotErr.String() != errs.String() {
		t.Errorf("stdout %q\nwant   %q\nstderr %q\nwant   %q", gotOut.String(), out.String(), gotErr.String(), errs.String())
	}
	if evs, _ := q.take(); len(evs) != 0 {
		t.Errorf("take left %d events", len(evs))
	}
}
