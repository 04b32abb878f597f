package kernel

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestRequestFrame(t *testing.T) {
	got := Request("/code", "/code/call-1.py", []string{"A=1", "B=2"})
	want := append([]byte{30, 0, 0, 0}, "/code\x00/code/call-1.py\x00A=1\x00B=2\x00"...)
	if !bytes.Equal(got, want) {
		t.Errorf("request %q, want %q", got, want)
	}
}

func TestReadReply(t *testing.T) {
	for status := range 256 {
		got, err := ReadReply(bytes.NewReader(Reply(status)))
		if err != nil || got != status {
			t.Fatalf("reply %d read as %d, %v", status, got, err)
		}
	}
	frame := func(body string) []byte {
		return append([]byte{byte(len(body)), 0, 0, 0}, body...)
	}
	for _, c := range []struct {
		in   []byte
		want error
	}{
		{nil, io.EOF},
		{[]byte{9, 0}, io.ErrUnexpectedEOF},
		{frame("exit=1\x00")[:6], io.ErrUnexpectedEOF},
		{[]byte{0xff, 0xff, 0xff, 0x7f}, ErrFrame},
		{frame("exit=\x00"), ErrFrame},
		{frame("exit=256\x00"), ErrFrame},
		{frame("exit=-1\x00"), ErrFrame},
		{frame("exit=01\x00"), ErrFrame},
		{frame("exit=+1\x00"), ErrFrame},
		{frame("exit=1"), ErrFrame},
		{frame("quit=1\x00"), ErrFrame},
		{frame(""), ErrFrame},
	} {
		if _, err := ReadReply(bytes.NewReader(c.in)); !errors.Is(err, c.want) {
			t.Errorf("%q: %v, want %v", c.in, err, c.want)
		}
	}
}

// A reply reads no byte past its frame: the next cell's reply follows it
// on the same pipe.
func TestReadReplyStopsAtTheFrame(t *testing.T) {
	r := bytes.NewReader(append(Reply(3), Reply(4)...))
	for _, want := range []int{3, 4} {
		if got, err := ReadReply(r); err != nil || got != want {
			t.Fatalf("read %d, %v, want %d", got, err, want)
		}
	}
}

func FuzzReadReply(f *testing.F) {
	f.Add(Reply(0))
	f.Add(Reply(255))
	f.Add([]byte{64, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		status, err := ReadReply(bytes.NewReader(in))
		if err == nil && (status < 0 || status > 255 || !bytes.HasPrefix(in, Reply(status))) {
			t.Fatalf("%q read as %d", in, status)
		}
	})
}
