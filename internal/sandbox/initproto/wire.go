package initproto

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"
)

// The engine and init exchange their messages in one small binary
// form, because one of the two inits (the namespaces backend's, in
// scratchrun-spawn) is C, which has no JSON decoder we would trust with
// hostile bytes, and because decoding JSON was a measurable part of the Go
// init's start. The readers and writers in namespaces/spawner/c/wire.c are
// the C side: its constants come from CHeader, and TestWireMatchesC (in
// package spawner) runs Go-encoded messages through the C decoders and a
// C-encoded result through the Go one. Any change here raises
// ProtocolVersion.
//
// A message is a frame: its body's length as a little-endian uint32, then
// the body. A body is a fixed sequence of fields, each one of:
//
//	u64    8 bytes, little-endian
//	bytes  u32 length, then that many bytes
//	list   u32 count, then count bytes fields
//	pairs  u32 count, then count (bytes, bytes) pairs
//
// in the order each message's MarshalBinary writes them.

// Setup flag bits.
const (
	setupMapsGroups    = 1 << 0
	setupJoinedNetwork = 1 << 1
	setupLockDownEarly = 1 << 2
	setupPrestart      = 1 << 3
	setupCopyHome      = 1 << 4
	setupSession       = 1 << 5
)

// Result flag bits.
const (
	resultStarted      = 1 << 0
	resultTimedOut     = 1 << 1
	resultProcessLimit = 1 << 2
	resultSeparated    = 1 << 3
	resultResidentUp   = 1 << 4
	resultResidentLost = 1 << 5
)

// WriteMessage writes m as one frame.
func WriteMessage(w io.Writer, m encoding.BinaryMarshaler) error {
	body, err := m.MarshalBinary()
	if err != nil {
		return err
	}
	if len(body) > 1<<31 {
		return fmt.Errorf("message of %d bytes is too large", len(body))
	}
	frame := binary.LittleEndian.AppendUint32(make([]byte, 0, 4+len(body)), uint32(len(body)))
	_, err = w.Write(append(frame, body...))
	return err
}

// ReadMessage reads one frame of at most max body bytes into m.
func ReadMessage(r io.Reader, max int64, m encoding.BinaryUnmarshaler) error {
	var head [4]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint32(head[:])
	if int64(n) > max {
		return fmt.Errorf("message of %d bytes is over its limit of %d", n, max)
	}
	// The body grows as its bytes arrive, not to the length the head
	// declares: a hostile init must send what it makes the engine hold.
	body := bytes.NewBuffer(make([]byte, 0, min(n, 64<<10)))
	if got, err := body.ReadFrom(io.LimitReader(r, int64(n))); err != nil || got < int64(n) {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("message cut short: %w", err)
	}
	return m.UnmarshalBinary(body.Bytes())
}

type encoder struct{ b []byte }

func (e *encoder) u32(v int)      { e.b = binary.LittleEndian.AppendUint32(e.b, uint32(v)) }
func (e *encoder) u64(v uint64)   { e.b = binary.LittleEndian.AppendUint64(e.b, v) }
func (e *encoder) bytes(v []byte) { e.u32(len(v)); e.b = append(e.b, v...) }
func (e *encoder) str(v string)   { e.bytes([]byte(v)) }
func (e *encoder) list(v []string) {
	e.u32(len(v))
	for _, s := range v {
		e.str(s)
	}
}

type decoder struct {
	b   []byte
	err error
}

var errShort = errors.New("message ends early")

func (d *decoder) take(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	v := d.b[:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) u32() uint32 {
	v := d.take(4)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint32(v)
}

func (d *decoder) u64() uint64 {
	v := d.take(8)
	if v == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(v)
}

func (d *decoder) bytes() []byte {
	n := d.u32()
	v := d.take(uint64(n))
	if v == nil {
		return nil
	}
	return append([]byte(nil), v...)
}

func (d *decoder) str() string { return string(d.bytes()) }

func (d *decoder) list() []string {
	n := d.u32()
	// Each entry takes at least its 4-byte length: a count the rest cannot
	// hold is malformed, not a reason to allocate.
	if uint64(n)*4 > uint64(len(d.b)) {
		d.err = errShort
		return nil
	}
	var out []string
	for range n {
		out = append(out, d.str())
	}
	return out
}

// count reads an element count, each element at least min bytes long; a
// count the rest of the message cannot hold is an error (and 0).
func (d *decoder) count(min uint64) uint32 {
	n := d.u32()
	if uint64(n)*min > uint64(len(d.b)) {
		d.err = errShort
		return 0
	}
	return n
}

func (d *decoder) pairs(each func(k string, v []byte)) {
	n := d.u32()
	if uint64(n)*8 > uint64(len(d.b)) {
		d.err = errShort
		return
	}
	for range n {
		k, v := d.str(), d.bytes()
		if d.err == nil {
			each(k, v)
		}
	}
}

func (d *decoder) done(what string) error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d bytes after the end", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("%s message: %w", what, d.err)
	}
	return nil
}

func flag(set bool, bit uint64) uint64 {
	if set {
		return bit
	}
	return 0
}

// MarshalBinary implements encoding.BinaryMarshaler.
// The version comes first, so that an init of another version can tell
// before it misreads anything else.
func (m SetupMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	e.u64(ProtocolVersion)
	e.str(m.RootFS)
	e.str(m.MountDir)
	e.u64(uint64(m.WritableBytes))
	e.u64(uint64(m.TmpBytes))
	e.u64(uint64(m.MaxInodes))
	e.str(m.Hostname)
	e.u64(flag(m.MapsGroups, setupMapsGroups) | flag(m.JoinedNetwork, setupJoinedNetwork) |
		flag(m.LockDownEarly, setupLockDownEarly) | flag(m.Prestart != nil, setupPrestart) | flag(m.CopyHome, setupCopyHome) |
		flag(m.Session, setupSession))
	e.list(m.DNS)
	e.list(m.MaskPaths)
	e.list(m.ReadOnlyPaths)
	e.bytes(m.Seccomp)
	var caps uint64
	for _, c := range m.KeepCapabilities {
		if c >= 64 {
			return nil, fmt.Errorf("capability %d does not fit the setup message", c)
		}
		caps |= 1 << c
	}
	e.u64(caps)
	var p PrestartSpec
	if m.Prestart != nil {
		p = *m.Prestart
	}
	e.list(p.Argv)
	e.list(p.Env)
	e.str(p.Dir)
	e.u32(len(m.UserNamespaceLimits))
	for _, s := range m.UserNamespaceLimits {
		e.str(s.Name)
		e.u64(s.Value)
	}
	e.u32(len(m.Rlimits))
	for _, r := range m.Rlimits {
		e.u64(uint64(r.Resource))
		e.u64(r.Value)
	}
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
// A message of another ProtocolVersion is a *VersionError.
func (m *SetupMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	if v := d.u64(); d.err == nil && v != ProtocolVersion {
		return &VersionError{Got: v}
	}
	*m = SetupMessage{RootFS: d.str(), MountDir: d.str(), WritableBytes: int64(d.u64()), TmpBytes: int64(d.u64()),
		MaxInodes: int64(d.u64()), Hostname: d.str()}
	flags := d.u64()
	m.MapsGroups = flags&setupMapsGroups != 0
	m.JoinedNetwork = flags&setupJoinedNetwork != 0
	m.LockDownEarly = flags&setupLockDownEarly != 0
	m.CopyHome = flags&setupCopyHome != 0
	m.Session = flags&setupSession != 0
	m.DNS = d.list()
	m.MaskPaths = d.list()
	m.ReadOnlyPaths = d.list()
	m.Seccomp = d.bytes()
	caps := d.u64()
	for c := range uintptr(64) {
		if caps&(1<<c) != 0 {
			m.KeepCapabilities = append(m.KeepCapabilities, c)
		}
	}
	p := PrestartSpec{Argv: d.list(), Env: d.list(), Dir: d.str()}
	if flags&setupPrestart != 0 {
		m.Prestart = &p
	}
	// Each setting takes at least 12 bytes, each rlimit 16: a count the
	// rest cannot hold is malformed, not a reason to allocate.
	if n := d.count(12); n > 0 {
		m.UserNamespaceLimits = make([]Setting, 0, n)
		for range n {
			m.UserNamespaceLimits = append(m.UserNamespaceLimits, Setting{Name: d.str(), Value: d.u64()})
		}
	}
	if n := d.count(16); n > 0 {
		m.Rlimits = make([]Rlimit, 0, n)
		for range n {
			m.Rlimits = append(m.Rlimits, Rlimit{Resource: int(d.u64()), Value: d.u64()})
		}
	}
	return d.done("setup")
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m ReadyMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	e.u64(flag(m.Ready, 1))
	e.str(m.Error)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *ReadyMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = ReadyMessage{Ready: d.u64()&1 != 0, Error: d.str()}
	return d.done("ready")
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m JobMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	e.list(m.Argv)
	e.list(m.Env)
	e.str(m.Dir)
	e.u32(len(m.Files))
	for _, f := range m.Files {
		e.str(f.Path)
		e.bytes(f.Data)
	}
	e.list(m.ReturnFiles)
	e.u64(uint64(m.MaxReturnBytes))
	e.u64(uint64(m.Timeout))
	var r ResidentJob
	if m.Resident != nil {
		if m.Resident.Key == "" {
			return nil, errors.New("a resident job needs a key")
		}
		r = *m.Resident
	}
	e.str(r.Key)
	e.list(r.Argv)
	e.list(r.Env)
	e.str(r.Dir)
	e.bytes(r.Request)
	e.u64(uint64(r.Interrupt))
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *JobMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	*m = JobMessage{Argv: d.list(), Env: d.list(), Dir: d.str()}
	d.pairs(func(k string, v []byte) { m.Files = append(m.Files, JobFile{Path: k, Data: v}) })
	m.ReturnFiles = d.list()
	m.MaxReturnBytes = int64(d.u64())
	m.Timeout = time.Duration(d.u64())
	r := ResidentJob{Key: d.str(), Argv: d.list(), Env: d.list(), Dir: d.str(), Request: d.bytes(), Interrupt: time.Duration(d.u64())}
	switch {
	case d.err != nil:
	case r.Key != "":
		m.Resident = &r
	case r.Argv != nil || r.Env != nil || r.Dir != "" || r.Request != nil || r.Interrupt != 0:
		d.err = errors.New("resident fields without a key")
	}
	return d.done("job")
}

// MarshalBinary implements encoding.BinaryMarshaler.
func (m ResultMessage) MarshalBinary() ([]byte, error) {
	var e encoder
	e.u64(flag(m.Started, resultStarted) | flag(m.TimedOut, resultTimedOut) | flag(m.ProcessLimitHit, resultProcessLimit) |
		flag(m.Separated, resultSeparated) | flag(m.ResidentStarted, resultResidentUp) | flag(m.ResidentLost, resultResidentLost))
	e.u64(uint64(int64(m.ExitCode)))
	e.u64(uint64(int64(m.Signal)))
	e.u64(uint64(m.Duration))
	e.u32(len(m.Files))
	for path, data := range m.Files {
		e.str(path)
		e.bytes(data)
	}
	e.list(m.Notes)
	e.str(m.Error)
	e.u64(m.Left)
	return e.b, nil
}

// UnmarshalBinary implements encoding.BinaryUnmarshaler.
func (m *ResultMessage) UnmarshalBinary(b []byte) error {
	d := decoder{b: b}
	flags := d.u64()
	*m = ResultMessage{
		Started:         flags&resultStarted != 0,
		TimedOut:        flags&resultTimedOut != 0,
		ProcessLimitHit: flags&resultProcessLimit != 0,
		Separated:       flags&resultSeparated != 0,
		ResidentStarted: flags&resultResidentUp != 0,
		ResidentLost:    flags&resultResidentLost != 0,
		ExitCode:        int(int64(d.u64())),
		Signal:          int(int64(d.u64())),
		Duration:        time.Duration(d.u64()),
		Files:           map[string][]byte{},
	}
	d.pairs(func(k string, v []byte) { m.Files[k] = v })
	m.Notes = d.list()
	m.Error = d.str()
	m.Left = d.u64()
	return d.done("result")
}
