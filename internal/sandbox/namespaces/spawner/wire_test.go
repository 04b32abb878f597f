package spawner

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/scratchrun/scratchrun/internal/engine/kernel"
	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// The engine <-> init protocol has one owner, package initproto; the C init
// must read and write exactly what it does. These tests keep the two from
// drifting: the C constants are generated from Go, and the C init's own
// wire code decodes Go's messages and encodes a result Go decodes.

var update = flag.Bool("update", false, "rewrite c/initproto.h from package initproto")

// c/initproto.h is what initproto.CHeader generates.
func TestInitHeaderIsCurrent(t *testing.T) {
	want := initproto.CHeader()
	if *update {
		if err := os.WriteFile(filepath.Join("c", "initproto.h"), want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := sources.ReadFile("c/initproto.h")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("c/initproto.h differs from initproto.CHeader(); regenerate it:\n"+
			"  go test ./internal/sandbox/namespaces/spawner -run TestInitHeaderIsCurrent -update\ngot:\n%s\nwant:\n%s", got, want)
	}
}

// buildC builds a program from C files with c/build.sh (the helper's own
// flags), in a copy of the sources: files are names in c/ or absolute paths.
func buildC(t *testing.T, name string, files ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := writeSources(dir); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, name)
	if out, err := exec.Command("/bin/sh", append([]string{filepath.Join(dir, "build.sh"), bin}, files...)...).CombinedOutput(); err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return bin
}

// runWithFrame runs bin with args, m as one frame on its fd 3 and a file on
// its fd 4, and returns its stdout and what it wrote to fd 4.
func runWithFrame(t *testing.T, bin string, m interface{ MarshalBinary() ([]byte, error) }, args ...string) (string, []byte) {
	t.Helper()
	dir := t.TempDir()
	var frame bytes.Buffer
	if err := initproto.WriteMessage(&frame, m); err != nil {
		t.Fatal(err)
	}
	control := filepath.Join(dir, "control")
	if err := os.WriteFile(control, frame.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(control)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	status, err := os.Create(filepath.Join(dir, "status"))
	if err != nil {
		t.Fatal(err)
	}
	defer status.Close()
	cmd := exec.Command(bin, args...)
	cmd.ExtraFiles = []*os.File{in, status}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", filepath.Base(bin), args, err, stderr.String())
	}
	answer, err := os.ReadFile(status.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(out), answer
}

// canon renders fields as wirecheck.c prints them.
type canon struct{ b strings.Builder }

func (c *canon) hex(name string, v []byte) { fmt.Fprintf(&c.b, "%s=%s\n", name, hex.EncodeToString(v)) }
func (c *canon) str(name, v string)        { c.hex(name, []byte(v)) }
func (c *canon) num(name string, v uint64) { fmt.Fprintf(&c.b, "%s=%d\n", name, v) }
func (c *canon) flag(name string, v bool) {
	n := uint64(0)
	if v {
		n = 1
	}
	c.num(name, n)
}
func (c *canon) list(name string, v []string) {
	for i, s := range v {
		c.str(fmt.Sprintf("%s[%d]", name, i), s)
	}
	fmt.Fprintf(&c.b, "%s#=%d\n", name, len(v))
}

func setupText(m initproto.SetupMessage) string {
	var c canon
	c.str("rootfs", m.RootFS)
	c.str("mount_dir", m.MountDir)
	c.num("writable_bytes", uint64(m.WritableBytes))
	c.num("tmp_bytes", uint64(m.TmpBytes))
	c.num("max_inodes", uint64(m.MaxInodes))
	c.str("hostname", m.Hostname)
	c.flag("maps_groups", m.MapsGroups)
	c.flag("joined_network", m.JoinedNetwork)
	c.flag("lock_down_early", m.LockDownEarly)
	c.flag("prestart", m.Prestart != nil)
	c.flag("copy_home", m.CopyHome)
	c.flag("session", m.Session)
	c.list("dns", m.DNS)
	c.list("mask_paths", m.MaskPaths)
	c.list("readonly_paths", m.ReadOnlyPaths)
	c.hex("seccomp", m.Seccomp)
	var caps uint64
	for _, k := range m.KeepCapabilities {
		caps |= 1 << k
	}
	c.num("keep_caps", caps)
	var p initproto.PrestartSpec
	if m.Prestart != nil {
		p = *m.Prestart
	}
	c.list("prestart_argv", p.Argv)
	c.list("prestart_env", p.Env)
	c.str("prestart_dir", p.Dir)
	for _, s := range m.UserNamespaceLimits {
		c.str("setting", s.Name)
		c.num("value", s.Value)
	}
	for _, r := range m.Rlimits {
		fmt.Fprintf(&c.b, "rlimit=%d:%d\n", r.Resource, r.Value)
	}
	return c.b.String()
}

func jobText(m initproto.JobMessage) string {
	var c canon
	c.list("argv", m.Argv)
	c.list("env", m.Env)
	c.str("dir", m.Dir)
	for _, f := range m.Files {
		c.str("file", f.Path)
		c.hex("data", f.Data)
	}
	c.list("return_files", m.ReturnFiles)
	c.num("max_return_bytes", uint64(m.MaxReturnBytes))
	c.num("timeout_ns", uint64(m.Timeout))
	var r initproto.ResidentJob
	if m.Resident != nil {
		r = *m.Resident
	}
	c.str("resident_key", r.Key)
	c.list("resident_argv", r.Argv)
	c.list("resident_env", r.Env)
	c.str("resident_dir", r.Dir)
	c.hex("resident_request", r.Request)
	c.num("resident_interrupt_ns", uint64(r.Interrupt))
	return c.b.String()
}

// The C init decodes every field of Go's setup and job messages as Go
// encoded them, refuses a setup of another protocol version in the Go
// init's words, and encodes a result Go decodes field for field.
func TestWireMatchesC(t *testing.T) {
	self, err := filepath.Abs(filepath.Join("testdata", "wirecheck.c"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "wirecheck", "wire.c", "util.c", self)

	setups := []initproto.SetupMessage{
		{RootFS: "/var/lib/img", MountDir: "/run/m", WritableBytes: 1 << 30, TmpBytes: 5 << 20, MaxInodes: 65536,
			Hostname: "sandbox", MapsGroups: true, JoinedNetwork: true, LockDownEarly: true, CopyHome: true,
			DNS: []string{"192.0.2.53", ""}, MaskPaths: initproto.MaskedPaths, ReadOnlyPaths: initproto.ReadOnlyPaths,
			Seccomp: []byte{0, 1, 2, 0xff, 0x20, 0, 0, 0}, KeepCapabilities: []uintptr{0, 5, 21, 63},
			Prestart:            &initproto.PrestartSpec{Argv: []string{"/usr/bin/python3", "-c", "x"}, Env: []string{"A=b", ""}, Dir: "/tmp"},
			UserNamespaceLimits: initproto.UserNamespaceLimits, Rlimits: initproto.KernelRlimits},
		{MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}},
	}
	for i, m := range setups {
		if got, _ := runWithFrame(t, bin, m, "setup"); got != setupText(m) {
			t.Errorf("setup %d as C reads it:\n%s\nas Go wrote it:\n%s", i, got, setupText(m))
		}
	}

	other := otherVersion{}
	want := "refused=" + (&initproto.VersionError{Got: initproto.ProtocolVersion + 1}).Error() + "\n"
	if got, _ := runWithFrame(t, bin, other, "setup"); got != want {
		t.Errorf("a setup of another version: C says %q, want %q", got, want)
	}

	job := initproto.JobMessage{Argv: []string{"/usr/bin/python3", "/code/main.py"}, Env: []string{"X=1", "", "ü=∑"}, Dir: "/tmp",
		Files:       []initproto.JobFile{{Path: "/code/main.py", Data: []byte("print(1)")}, {Path: "/tmp/bin", Data: []byte{0, 1, 0, 0xfe}}, {Path: "/tmp/empty"}},
		ReturnFiles: []string{"/tmp/a.png", "/tmp/b"}, MaxReturnBytes: 10<<20 | 5, Timeout: 30 * time.Second}
	got, answer := runWithFrame(t, bin, job, "job")
	if got != jobText(job) {
		t.Errorf("job as C reads it:\n%s\nas Go wrote it:\n%s", got, jobText(job))
	}
	var res initproto.ResultMessage
	if err := initproto.ReadMessage(bytes.NewReader(answer), 1<<20, &res); err != nil {
		t.Fatalf("the C result does not decode: %v", err)
	}
	wantRes := initproto.ResultMessage{Started: true, ProcessLimitHit: true, ExitCode: -2, Signal: 3, Duration: 30 * time.Second,
		Files: map[string][]byte{"/code/main.py": []byte("print(1)"), "/tmp/bin": {0, 1, 0, 0xfe}, "/tmp/empty": nil},
		Notes: []string{"/tmp/a.png", "/tmp/b"}, Error: "/tmp", Left: 2}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("the C result decodes as\n%+v\nwant\n%+v", res, wantRes)
	}
}

// The C init decodes every kind of a session's requests as Go encoded
// them, refuses malformed ones, and encodes a file message Go decodes.
func TestRequestWireMatchesC(t *testing.T) {
	self, err := filepath.Abs(filepath.Join("testdata", "wirecheck.c"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "wirecheck", "wire.c", "util.c", self)
	job := initproto.JobMessage{Argv: []string{"/bin/sh", "-c", "x"}, Env: []string{"A=1"}, Dir: "/code",
		Files: []initproto.JobFile{{Path: "/tmp/bin", Data: []byte{0, 1, 0xfe}}}, ReturnFiles: []string{"/tmp/r"}, MaxReturnBytes: 7, Timeout: time.Second}
	resident := initproto.JobMessage{Files: []initproto.JobFile{{Path: "/code/cell-1.py", Data: []byte("x = 1")}}, Timeout: time.Second,
		Resident: &initproto.ResidentJob{Key: "python", Argv: []string{"/usr/bin/python3", "-c", "k"}, Env: []string{"A=1", "ü=∑"},
			Dir: "/tmp", Request: []byte{5, 0, 0, 0, '/', 0, 'x', 0, 0xff}, Interrupt: 3 * time.Second}}
	file := func(kind initproto.RequestKind, path string, max uint64, data []byte) string {
		var c canon
		c.num("kind", uint64(kind))
		c.str("path", path)
		c.num("max", max)
		c.hex("data", data)
		return c.b.String()
	}
	cases := []struct {
		req      initproto.Request
		want     string
		wantFile initproto.FileMessage
	}{
		{initproto.Request{Kind: initproto.RequestJob, Job: job}, fmt.Sprintf("kind=%d\n", initproto.RequestJob) + jobText(job), initproto.FileMessage{}},
		{initproto.Request{Kind: initproto.RequestJob, Job: resident}, fmt.Sprintf("kind=%d\n", initproto.RequestJob) + jobText(resident), initproto.FileMessage{}},
		{initproto.Request{Kind: initproto.RequestCancel}, fmt.Sprintf("kind=%d\n", initproto.RequestCancel), initproto.FileMessage{}},
		{initproto.Request{Kind: initproto.RequestEnd}, fmt.Sprintf("kind=%d\n", initproto.RequestEnd), initproto.FileMessage{}},
		{initproto.Request{Kind: initproto.RequestFileRead, Path: "/tmp/ü", Max: 1 << 20}, file(initproto.RequestFileRead, "/tmp/ü", 1<<20, nil),
			initproto.FileMessage{Data: []byte("/tmp/ü"), Error: "/tmp/ü"}},
		{initproto.Request{Kind: initproto.RequestFileWrite, Path: "/code/x", Data: []byte{0, 0xff, 0}}, file(initproto.RequestFileWrite, "/code/x", 0, []byte{0, 0xff, 0}),
			initproto.FileMessage{Data: []byte{0, 0xff, 0}, Error: "/code/x"}},
	}
	for _, tc := range cases {
		got, answer := runWithFrame(t, bin, tc.req, "request")
		if got != tc.want {
			t.Errorf("request %d as C reads it:\n%s\nas Go wrote it:\n%s", tc.req.Kind, got, tc.want)
		}
		var f initproto.FileMessage
		if err := initproto.ReadMessage(bytes.NewReader(answer), 1<<20, &f); err != nil {
			t.Fatalf("request %d: the C file message does not decode: %v", tc.req.Kind, err)
		}
		if tc.req.Kind == initproto.RequestFileRead || tc.req.Kind == initproto.RequestFileWrite {
			if !reflect.DeepEqual(f, tc.wantFile) {
				t.Errorf("request %d: the C file message decodes as %+v, want %+v", tc.req.Kind, f, tc.wantFile)
			}
		}
	}
	le := func(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
	for name, body := range map[string][]byte{
		"unknown kind":     le(99),
		"cancel with more": append(le(uint64(initproto.RequestCancel)), 0),
		"read over max":    append(append(le(uint64(initproto.RequestFileRead)), 0, 0, 0, 0), le(initproto.MaxFileReadBytes+1)...),
		"write cut short":  append(le(uint64(initproto.RequestFileWrite)), 1, 0, 0, 0),
		"resident no argv": residentBody(t, initproto.ResidentJob{Key: "k"}),
		"no argv, no key":  residentBody(t, initproto.ResidentJob{}),
		"interrupt no key": noKey(residentBody(t, initproto.ResidentJob{})),
	} {
		if got, _ := runWithFrame(t, bin, rawBody(body), "request"); got != "malformed\n" {
			t.Errorf("%s: C read %q, want it refused", name, got)
		}
	}
}

// residentBody is a job request of no argv with r as its resident part.
func residentBody(t *testing.T, r initproto.ResidentJob) []byte {
	t.Helper()
	m := initproto.JobMessage{Timeout: time.Second}
	if r.Key != "" {
		m.Resident = &r
	}
	b, err := initproto.Request{Kind: initproto.RequestJob, Job: m}.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// noKey sets the interrupt (the body's last u64) of a job without a key.
func noKey(b []byte) []byte {
	b[len(b)-8] = 1
	return b
}

// The C init takes a kernel's exit status only from a reply frame of
// exactly "exit=N\0" (N in 0-255 as Go's strconv.Itoa writes it), of the
// length it declares: anything else loses the kernel.
func TestKernelReplyMatchesC(t *testing.T) {
	self, err := filepath.Abs(filepath.Join("testdata", "wirecheck.c"))
	if err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "wirecheck", "wire.c", "util.c", self)
	for _, status := range []int{0, 7, 130, 255} {
		if got, _ := runWithFrame(t, bin, rawBody(kernel.Reply(status)), "reply"); got != fmt.Sprintf("status=%d\n", status) {
			t.Errorf("kernel.Reply(%d): C read %q", status, got)
		}
	}
	frame := func(body string, extra int) []byte {
		return append(binary.LittleEndian.AppendUint32(nil, uint32(len(body)+extra)), body...)
	}
	long := "exit=1\x00" + strings.Repeat("x", initproto.MaxKernelReply)
	for _, b := range [][]byte{
		frame("exit=256\x00", 0), frame("exit=01\x00", 0), frame("exit=-1\x00", 0), frame("exit=\x00", 0),
		frame("exit=1", 0), frame("exit=1\x00", 1), frame("exit=1\x00", -1), frame("exit=1\x00\x00", 0),
		frame("exix=1\x00", 0), frame(long, 0), {7, 0, 0}, frame("exit=1000\x00", 0), frame("junk!", 0),
	} {
		if got, _ := runWithFrame(t, bin, rawBody(b), "reply"); got != "malformed\n" {
			t.Errorf("reply %q: C read %q, want it refused", b, got)
		}
		if _, err := kernel.ReadReply(bytes.NewReader(b)); err == nil && len(b) >= 4 && int(binary.LittleEndian.Uint32(b)) == len(b)-4 {
			t.Errorf("reply %q: Go's kernel.ReadReply takes it, C refuses it", b)
		}
	}
	if kernel.MaxReply != initproto.MaxKernelReply {
		t.Errorf("kernel.MaxReply %d, initproto.MaxKernelReply %d", kernel.MaxReply, initproto.MaxKernelReply)
	}
}

// rawBody is a frame's body as it is.
type rawBody []byte

func (b rawBody) MarshalBinary() ([]byte, error) { return b, nil }

// otherVersion is a valid setup of the next protocol version.
type otherVersion struct{}

func (otherVersion) MarshalBinary() ([]byte, error) {
	b, err := initproto.SetupMessage{MaskPaths: []string{"/proc/kcore"}, ReadOnlyPaths: []string{"/proc/sys"}}.MarshalBinary()
	if err == nil {
		binary.LittleEndian.PutUint64(b, initproto.ProtocolVersion+1)
	}
	return b, err
}

// The request header the engine sends is laid out as the helper's struct
// request, field for field.
func TestRequestLayoutMatchesC(t *testing.T) {
	dir := t.TempDir()
	layout := filepath.Join(dir, "layout.c")
	if err := os.WriteFile(layout, []byte(`// Prints struct request's layout (spawn.c's, included whole).
#define main spawner_main
#include "spawn.c"
#undef main
#include <stddef.h>
int main(void) {
	printf("size=%zu version=%d\n", sizeof(struct request), PROTOCOL_VERSION);
#define FIELD(f) printf("%s=%zu\n", #f, offsetof(struct request, f))
	FIELD(version); FIELD(want_netns); FIELD(clone_flags); FIELD(deny_setgroups);
	FIELD(strings_len); FIELD(cgroupc); FIELD(owner_uid); FIELD(cgroup_fds); FIELD(reserved);
	return 0;
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "layout", layout, "init.c", "wire.c", "rootfs.c", "home.c", "confine.c", "job.c", "session.c", "kernel.c", "util.c", "zygote.c", "zygote_launch.c", "zygote_seccomp.c")
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var r request
	want := fmt.Sprintf("size=%d version=%d\n", binary.Size(r), protocolVersion)
	typ := reflect.TypeOf(r)
	names := []string{"version", "want_netns", "clone_flags", "deny_setgroups", "strings_len", "cgroupc", "owner_uid", "cgroup_fds", "reserved"}
	if typ.NumField() != len(names) {
		t.Fatalf("request has %d fields, the C struct %d", typ.NumField(), len(names))
	}
	for i, name := range names {
		want += fmt.Sprintf("%s=%d\n", name, typ.Field(i).Offset)
	}
	if string(out) != want || binary.Size(r) != requestSize || unsafe.Sizeof(r) != requestSize {
		t.Errorf("C layout:\n%s\nGo layout:\n%s(requestSize %d)", out, want, requestSize)
	}
}
