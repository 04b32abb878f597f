package kernel

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// MaxReply bounds a reply frame's body. "exit=255\0" is 9 bytes; anything
// longer is not a kernel's reply.
const MaxReply = 64

// ErrFrame reports a reply that breaks the frame: the kernel (or user code
// writing its fd 4) is no longer trusted to speak it.
var ErrFrame = errors.New("kernel: malformed reply")

// Request encodes one cell for a kernel's fd 3: the working directory (used
// by the kernel's first cell only), the program file and the environment.
func Request(dir, path string, env []string) []byte {
	body := initproto.PrestartJob([]string{path}, env, dir)
	return append(binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body))), body...)
}

// Reply encodes a kernel's answer to a cell: its exit status, 0-255.
func Reply(status int) []byte {
	body := fmt.Appendf(nil, "exit=%d\x00", status)
	return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// ReadReply reads one reply from r and returns the cell's exit status. It
// reads no more than the frame, and at most MaxReply bytes of body: an end
// of file before a whole frame is io.ErrUnexpectedEOF (io.EOF when nothing
// came), anything that is not "exit=N\0" with N in 0-255 is ErrFrame.
func ReadReply(r io.Reader) (int, error) {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return 0, err
	}
	n := binary.LittleEndian.Uint32(head[:])
	if n > MaxReply {
		return 0, fmt.Errorf("%w: %d bytes", ErrFrame, n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return 0, err
	}
	const prefix = "exit="
	if len(body) < len(prefix)+2 || string(body[:len(prefix)]) != prefix || body[len(body)-1] != 0 {
		return 0, fmt.Errorf("%w: %q", ErrFrame, body)
	}
	digits := string(body[len(prefix) : len(body)-1])
	status, err := strconv.Atoi(digits)
	if err != nil || status < 0 || status > 255 || strconv.Itoa(status) != digits {
		return 0, fmt.Errorf("%w: %q", ErrFrame, body)
	}
	return status, nil
}
