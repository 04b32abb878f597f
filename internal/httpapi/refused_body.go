package httpapi

import (
	"io"
	"net/http"
)

// maxDrainedBody bounds what of a body refused as too large is read and
// dropped before its 413 goes out.
const maxDrainedBody = 64 << 20

// drainRefused reads and drops a body refused by its declared size, when
// that size is within maxDrainedBody, so that the client reads the 413: a
// server that closes with unread bytes in its socket makes the kernel
// reset the connection, and a client still writing its body then sees the
// reset, not the answer (Node's fetch did, now and then). What it reads is
// what the client sends anyway, within the body's read deadline
// (BoundBodies); a bigger declared body is not read, and its client may
// see a reset.
func drainRefused(r *http.Request) {
	if r.ContentLength <= 0 || r.ContentLength > maxDrainedBody {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, r.ContentLength))
}
