package initproto

import (
	"bytes"
	"encoding"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestWireRoundTrip(t *testing.T) {
	msgs := []struct {
		in  encoding.BinaryMarshaler
		out encoding.BinaryUnmarshaler
	}{
		{SetupMessage{RootFS: "/img", MountDir: "/run/m", WritableBytes: 1 << 30, TmpBytes: 5, MaxInodes: 7, Hostname: "sandbox",
			MapsGroups: true, CopyHome: true, LockDownEarly: true, DNS: []string{"192.0.2.53"}, MaskPaths: MaskedPaths, ReadOnlyPaths: ReadOnlyPaths, Seccomp: []byte{1, 2, 3, 4, 5, 6, 7, 8},
			KeepCapabilities: []uintptr{0, 5, 63}, Prestart: &PrestartSpec{Argv: []string{"python3", "-c", "x"}, Env: []string{"A=b"}, Dir: "/code"},
			UserNamespaceLimits: UserNamespaceLimits, Rlimits: KernelRlimits},
			&SetupMessage{}},
		{SetupMessage{JoinedNetwork: true}, &SetupMessage{}},
		{ReadyMessage{Error: "mount: no"}, &ReadyMessage{}},
		{ReadyMessage{Ready: true}, &ReadyMessage{}},
		{JobMessage{Argv: []string{"python3", "/code/main.py"}, Env: []string{"X=1", ""}, Dir: "/code",
			Files:       []JobFile{{Path: "/code/main.py", Data: []byte("print(1)")}, {Path: "/tmp/empty"}},
			ReturnFiles: []string{"/tmp/a.png"}, MaxReturnBytes: 10 << 20, Timeout: 30 * time.Second}, &JobMessage{}},
		{SetupMessage{Session: true}, &SetupMessage{}},
		{Request{Kind: RequestJob, Job: JobMessage{Argv: []string{"/bin/sh"}, Files: []JobFile{{Path: "/tmp/b", Data: []byte{0, 0xff}}}, Timeout: time.Second}}, &Request{}},
		{Request{Kind: RequestCancel}, &Request{}},
		{Request{Kind: RequestEnd}, &Request{}},
		{Request{Kind: RequestFileRead, Path: "/tmp/a", Max: 1 << 20}, &Request{}},
		{Request{Kind: RequestFileWrite, Path: "/code/x.bin", Data: []byte{0, 1, 0, 0xfe}}, &Request{}},
		{FileMessage{Data: []byte{0, 1}}, &FileMessage{}},
		{FileMessage{Error: "it does not exist"}, &FileMessage{}},
		{ResultMessage{Started: true, TimedOut: true, Separated: true, Left: 2, Files: map[string][]byte{}}, &ResultMessage{}},
		{ResultMessage{Started: true, ResidentStarted: true, ResidentLost: true, Files: map[string][]byte{}}, &ResultMessage{}},
		{Request{Kind: RequestJob, Job: JobMessage{Argv: []string{"/bin/true"}, Timeout: time.Second, Resident: &ResidentJob{Key: "python",
			Argv: []string{"/usr/bin/python3", "-c", "k"}, Env: []string{"A=1"}, Dir: "/tmp", Request: []byte{4, 0, 0, 0, 'a', 0, 'b', 0},
			Interrupt: 2 * time.Second}}}, &Request{}},
		{ResultMessage{Started: true, TimedOut: true, ProcessLimitHit: true, ExitCode: -1, Signal: 9, Duration: time.Second,
			Files: map[string][]byte{"/tmp/a": []byte("xyz")}, Notes: []string{"n"}, Error: "e"}, &ResultMessage{}},
	}
	for _, m := range msgs {
		var buf bytes.Buffer
		if err := WriteMessage(&buf, m.in); err != nil {
			t.Fatal(err)
		}
		if err := ReadMessage(&buf, 1<<20, m.out); err != nil {
			t.Fatalf("%T: %v", m.in, err)
		}
		got := reflect.ValueOf(m.out).Elem().Interface()
		want := m.in
		if r, ok := want.(ResultMessage); ok && r.Files == nil {
			r.Files = map[string][]byte{}
			want = r
		}
		if j, ok := got.(JobMessage); ok {
			// An empty input file decodes as empty, not nil.
			for i := range j.Files {
				if len(j.Files[i].Data) == 0 {
					j.Files[i].Data = nil
				}
			}
			got = j
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip of %T:\n got %+v\nwant %+v", m.in, got, want)
		}
	}
}

func TestWireRefusesMalformed(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteMessage(&buf, JobMessage{Argv: []string{"a"}}); err != nil {
		t.Fatal(err)
	}
	frame := buf.Bytes()
	var job JobMessage
	if err := ReadMessage(bytes.NewReader(frame), 3, &job); err == nil || !strings.Contains(err.Error(), "over its limit") {
		t.Errorf("oversized frame: %v", err)
	}
	if err := ReadMessage(bytes.NewReader(frame[:len(frame)-1]), 1<<20, &job); err == nil {
		t.Error("a cut frame decoded")
	}
	// A list count far beyond the body must fail, not allocate.
	if err := job.UnmarshalBinary([]byte{0xff, 0xff, 0xff, 0x7f}); err == nil {
		t.Error("an impossible count decoded")
	}
	if err := (&ReadyMessage{}).UnmarshalBinary(append(make([]byte, 12), 0)); err == nil {
		t.Error("trailing bytes were accepted")
	}
}

// A session's requests are refused when their kind is unknown, when they
// carry bytes their kind has no field for, or when a read asks for more
// than MaxFileReadBytes; a request of an unknown kind does not encode.
func TestRequestRefusesMalformed(t *testing.T) {
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	bad := map[string][]byte{
		"unknown kind":     le(99),
		"no kind":          {1, 0},
		"cancel with more": append(le(uint64(RequestCancel)), 0),
		"read over max":    append(append(le(uint64(RequestFileRead)), 0, 0, 0, 0), le(MaxFileReadBytes+1)...),
		"write cut short":  append(le(uint64(RequestFileWrite)), 1, 0, 0, 0),
		"job malformed":    append(le(uint64(RequestJob)), 0xff, 0xff, 0xff, 0x7f),
	}
	for name, body := range bad {
		if err := (&Request{}).UnmarshalBinary(body); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	if _, err := (Request{Kind: 99}).MarshalBinary(); err == nil {
		t.Error("a request of an unknown kind encoded")
	}
}

// A resident job's fields are refused without their key, and a resident
// job without a key does not encode.
func TestResidentJobRefusesMalformed(t *testing.T) {
	body, err := JobMessage{Argv: []string{"/bin/true"}}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	// The last fields are key, argv, env, dir, request (u32s) and the
	// interrupt (u64): an interrupt without a key.
	body[len(body)-8] = 1
	if err := (&JobMessage{}).UnmarshalBinary(body); err == nil || !strings.Contains(err.Error(), "without a key") {
		t.Errorf("an interrupt without a key: %v", err)
	}
	if _, err := (JobMessage{Argv: []string{"a"}, Resident: &ResidentJob{Argv: []string{"k"}}}).MarshalBinary(); err == nil {
		t.Error("a resident job without a key encoded")
	}
}

// A setup of another protocol version is refused as such, before any of
// its other fields is read.
func TestSetupOfAnotherVersionIsRefused(t *testing.T) {
	body, err := SetupMessage{RootFS: "/img", Hostname: "sandbox"}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if got := binary.LittleEndian.Uint64(body); got != ProtocolVersion {
		t.Fatalf("setup starts with %d, want the protocol version %d", got, ProtocolVersion)
	}
	binary.LittleEndian.PutUint64(body, ProtocolVersion+1)
	var m SetupMessage
	err = m.UnmarshalBinary(body)
	var v *VersionError
	if !errors.As(err, &v) || v.Got != ProtocolVersion+1 {
		t.Fatalf("got %v, want a VersionError for version %d", err, ProtocolVersion+1)
	}
	if want := fmt.Sprintf("the engine speaks init protocol version %d and this init version %d", ProtocolVersion+1, ProtocolVersion); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not say %q", err, want)
	}
}

// A head that declares a large body makes the reader hold only the bytes
// that arrive: a hostile init that declares 256 MiB and sends ten bytes
// costs the engine kilobytes, and its message is refused as cut short.
func TestReadMessageHoldsOnlyWhatArrives(t *testing.T) {
	var head [4]byte
	binary.LittleEndian.PutUint32(head[:], 256<<20)
	stream := append(head[:], "ten bytes!"...)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	err := ReadMessage(bytes.NewReader(stream), 512<<20, &ResultMessage{})
	runtime.ReadMemStats(&after)
	if err == nil || !strings.Contains(err.Error(), "cut short") {
		t.Errorf("a body cut short: %v", err)
	}
	if held := after.TotalAlloc - before.TotalAlloc; held > 1<<20 {
		t.Errorf("reading a 10-byte body declared as 256 MiB allocated %d bytes", held)
	}
}
