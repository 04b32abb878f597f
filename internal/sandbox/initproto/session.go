package initproto

import (
	"fmt"
	"time"
)

// A session sandbox (SetupMessage.Session) runs jobs one after another,
// and its control pipe stays open for its whole life: every frame on it
// after the setup is a Request, and init answers each on the status pipe
// in order, a job with a ResultMessage and a file operation with a
// FileMessage. A CancelRequest gets no answer of its own: it ends the job
// in flight (as its timeout would), whose ResultMessage then follows, and
// one that arrives between jobs is ignored (the job it meant has already
// reported). End of file on control, or an EndRequest, ends the session:
// init kills everything and exits, as after a plain sandbox's one job.

// RequestKind says what a Request asks for.
type RequestKind uint64

// Request kinds; the values are the wire's.
const (
	RequestJob       RequestKind = 1
	RequestCancel    RequestKind = 2
	RequestFileRead  RequestKind = 3
	RequestFileWrite RequestKind = 4
	RequestEnd       RequestKind = 5
)

// MaxFileReadBytes bounds what one FileRead may ask init to return.
const MaxFileReadBytes = 256 << 20

// Request is one message on a session's control pipe: its Kind and, for a
// job or a file operation, that operation's fields (the others are zero).
type Request struct {
	Kind RequestKind
	// Job is the job to run (RequestJob).
	Job JobMessage
	// Path is the file a FileRead or FileWrite names, as a return file is
	// named: resolved within the sandbox's root, never following a link
	// out of it.
	Path string
	// Max bounds the size of the file a FileRead returns.
	Max int64
	// Data is what a FileWrite writes (the file is created or truncated,
	// its missing parent directories made).
	Data []byte
}

// FileMessage answers a FileRead (Data) or a FileWrite; Error, when set,
// says in a sentence why it could not be done.
type FileMessage struct {
	Data  []byte
	Error string
}

// MarshalBinary implements encoding.BinaryMarshaler: the kind, then the
// fields of that kind only.
func (m Request) MarshalBinary() ([]byte, error) {
	var e encoder
	e.u64(uint64(m.Kind))
	switch m.Kind {
	case RequestJob:
		body, err := m.Job.MarshalBinary()
		if err != nil {
			return nil, err
		}
		e.b = append(e.b, body...)
	case RequestFileRead:
		e.str(m.Path)
		e.u64(uint64(m.Max))
	case RequestFileWrite:
		e.str(m.Path)
		e.bytes(m.Data)
	case RequestCancel, RequestEnd:
	default:
		return nil, fmt.Errorf("request of unknown kind %d", m.Kind)
	}
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *Request) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = Request{Kind: RequestKind(d.u64())}
	if d.err != nil {
		return d.done("request")
	}
	switch m.Kind {
	case RequestJob:
		return m.Job.UnmarshalBinary(d.b)
	case RequestFileRead:
		m.Path = d.str()
		max := d.u64()
		if max > MaxFileReadBytes {
			return fmt.Errorf("request message: a read of up to %d bytes is over the limit of %d", max, MaxFileReadBytes)
		}
		m.Max = int64(max)
	case RequestFileWrite:
		m.Path = d.str()
		m.Data = d.bytes()
	case RequestCancel, RequestEnd:
	default:
		return fmt.Errorf("request message of unknown kind %d", m.Kind)
	}
	return d.done("request")
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m FileMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	e.bytes(m.Data)
	e.str(m.Error)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *FileMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = FileMessage{Data: d.bytes(), Error: d.str()}
	return d.done("file")
}

// SeparateWithin is how long a session's init keeps killing a timed-out
// job's processes before it gives up: a tree that is not empty by then
// cannot be told apart from the session's (ResultMessage.Separated false),
// and the engine ends the session.
const SeparateWithin = time.Second
