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
		Notes: []string{"/tmp/a.png", "/tmp/b"}, Error: "/tmp"}
	if !reflect.DeepEqual(res, wantRes) {
		t.Errorf("the C result decodes as\n%+v\nwant\n%+v", res, wantRes)
	}
}

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
	FIELD(strings_len); FIELD(cgroupc); FIELD(owner_uid);
	return 0;
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := buildC(t, "layout", layout, "init.c", "wire.c", "rootfs.c", "home.c", "confine.c", "job.c", "util.c")
	out, err := exec.Command(bin).Output()
	if err != nil {
		t.Fatal(err)
	}
	var r request
	want := fmt.Sprintf("size=%d version=%d\n", binary.Size(r), protocolVersion)
	typ := reflect.TypeOf(r)
	names := []string{"version", "want_netns", "clone_flags", "deny_setgroups", "strings_len", "cgroupc", "owner_uid"}
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
