package initproto

import (
	"bytes"
	"encoding"
	"reflect"
	"runtime"
	"testing"
)

// fuzzMaxBody is the frame limit the fuzz target reads with: the engine's
// own limits (MaxSetupBytes, twice a job's return bytes) are larger, and a
// frame declaring up to the limit is allocated as declared (ReadMessage
// reads the body whole), which is the bound's meaning.
const fuzzMaxBody = 1 << 20

// fuzzMessages are the messages a frame may hold, by the fuzz target's
// first argument: those init sends (the engine's untrusted input: a
// compromised sandbox writes them) and those it reads.
var fuzzMessages = []func() encoding.BinaryUnmarshaler{
	func() encoding.BinaryUnmarshaler { return &ReadyMessage{} },
	func() encoding.BinaryUnmarshaler { return &ResultMessage{} },
	func() encoding.BinaryUnmarshaler { return &VMReport{} },
	func() encoding.BinaryUnmarshaler { return &SetupMessage{} },
	func() encoding.BinaryUnmarshaler { return &JobMessage{} },
	func() encoding.BinaryUnmarshaler { return &VMMessage{} },
	func() encoding.BinaryUnmarshaler { return &Request{} },
	func() encoding.BinaryUnmarshaler { return &FileMessage{} },
}

// FuzzReadMessage reads one frame of arbitrary bytes as each message, as
// the engine reads what a sandbox's init writes on its status pipe and init
// what it reads on its control pipe. Decoding must never panic: a frame is
// a message or an error. What it allocates is bounded by the frame limit
// plus a small multiple of the bytes actually given, never by a count or
// length the frame declares. And a decoded message encodes to a frame that
// decodes to the same message. The seeds, in testdata/fuzz/FuzzReadMessage,
// are valid messages of every kind and the malformed frames of the wire
// tests (cut, oversized, impossible counts, trailing bytes, another
// protocol version).
func FuzzReadMessage(f *testing.F) {
	f.Fuzz(func(t *testing.T, kind uint8, frame []byte) {
		newMsg := fuzzMessages[int(kind)%len(fuzzMessages)]
		m := newMsg()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		err := ReadMessage(bytes.NewReader(frame), fuzzMaxBody, m)
		runtime.ReadMemStats(&after)
		if got, bound := after.TotalAlloc-before.TotalAlloc, uint64(fuzzMaxBody+64*len(frame)+64<<10); got > bound {
			t.Fatalf("reading a %d-byte frame as %T allocated %d bytes, over %d", len(frame), m, got, bound)
		}
		if err != nil {
			return
		}
		var buf bytes.Buffer
		if err := WriteMessage(&buf, m.(encoding.BinaryMarshaler)); err != nil {
			t.Fatalf("a decoded %T does not encode: %v", m, err)
		}
		again := newMsg()
		if err := ReadMessage(&buf, int64(buf.Len()), again); err != nil {
			t.Fatalf("a decoded %T encodes to a frame that does not decode: %v", m, err)
		}
		if !reflect.DeepEqual(m, again) {
			t.Fatalf("%T changed in a round trip:\n got %+v\nwant %+v", m, again, m)
		}
	})
}
