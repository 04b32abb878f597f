package main

import (
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/vishvananda/netns"

	"github.com/scratchrun/scratchrun/internal/testenv"
	"github.com/scratchrun/scratchrun/internal/testenv/pkgindex"
)

// The package tests' world: the engine runs in a network namespace of its
// own whose only way out is a veth to an "outside" namespace, where the
// package indexes listen on an internet-like address. Every packet stays in
// namespaces the test made.
const (
	indexHost = "198.51.100.10"
	indexURL  = "http://" + indexHost
)

type packageWorld struct {
	host string // the namespace scratchrun runs in
}

func newPackageWorld(t *testing.T, index http.Handler) *packageWorld {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for network namespaces and egress")
	}
	host := fmt.Sprintf("srpkg-host-%d", os.Getpid())
	outside := fmt.Sprintf("srpkg-out-%d", os.Getpid())
	ip := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	ip("netns", "add", host)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", host).Run() })
	ip("netns", "add", outside)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", outside).Run() })
	ip("link", "add", "wan0", "netns", host, "type", "veth", "peer", "name", "wan1", "netns", outside)
	ip("-n", host, "link", "set", "lo", "up")
	ip("-n", host, "addr", "add", "192.0.2.2/24", "dev", "wan0")
	ip("-n", host, "link", "set", "wan0", "up")
	ip("-n", host, "route", "add", "default", "via", "192.0.2.1")
	ip("-n", outside, "link", "set", "lo", "up")
	ip("-n", outside, "addr", "add", "192.0.2.1/24", "dev", "wan1")
	ip("-n", outside, "link", "set", "wan1", "up")
	ip("-n", outside, "addr", "add", indexHost+"/32", "dev", "lo")

	l := listenInNamespace(t, outside, indexHost+":80")
	srv := &http.Server{Handler: index}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return &packageWorld{host: host}
}

// listenInNamespace opens a listener in the named namespace (a socket
// belongs to the namespace of the thread that creates it).
func listenInNamespace(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	home, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer home.Close()
	target, err := netns.GetFromName(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer netns.Set(home)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// exec runs `scratchrun exec` with egress in the world's namespace.
func (w *packageWorld) exec(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", w.host, binary, "exec", "--allow-egress", "--network", "egress", "--timeout-ms", "30000", "--memory-mb", "512"}, args...)...)
	cmd.Env = append(append(os.Environ(), "SCRATCHRUN_DNS=198.51.100.53"), env...)
	return runCLI(t, cmd)
}

// Agents with egress install what they miss: pip (both Python images) and
// npm fetch from the indexes, the packages work, land in the call's own
// writable layer and are gone in the next call; a package too big for the
// writable layer gets a note that says what the room is.
func TestPipAndNpmInstallWithEgress(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	big := make([]byte, 24<<20)
	rng := rand.NewChaCha8([32]byte{1})
	rng.Read(big)
	index := &pkgindex.Index{
		URL: indexURL,
		Wheels: map[string][]byte{
			"scratchrun-hello": pkgindex.Wheel(t, "scratchrun-hello", map[string][]byte{
				"scratchrun_hello/__init__.py": []byte("GREETING = 'hello from the index'\n"),
			}),
			"scratchrun-big": pkgindex.Wheel(t, "scratchrun-big", map[string][]byte{
				"scratchrun_big/__init__.py": []byte(""),
				"scratchrun_big/data.bin":    big,
			}),
		},
		Tarballs: map[string][]byte{
			"scratchrun-hello": pkgindex.NpmTarball(t, "scratchrun-hello", "module.exports = {greeting: 'hello from npm'};\n"),
		},
	}
	w := newPackageWorld(t, index)
	pipEnv := []string{"--env", "PIP_INDEX_URL=" + indexURL + "/simple/", "--env", "PIP_TRUSTED_HOST=" + indexHost}

	const pipCode = `import subprocess, sys
r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "scratchrun-hello"], capture_output=True, text=True)
if r.returncode:
    print(r.stdout, r.stderr)
import scratchrun_hello
print(scratchrun_hello.GREETING, scratchrun_hello.__file__)
`
	for _, rt := range []string{"python3.13", "python3.11"} {
		r := w.exec(t, nil, append([]string{"--runtime", rt, "--code", pipCode}, pipEnv...)...)
		site := "/usr/local/lib/" + rt + "/dist-packages/scratchrun_hello/__init__.py"
		if want := "hello from the index " + site + "\n"; r.code != 0 || r.stdout != want {
			t.Errorf("%s pip install: exit %d stdout %q (want %q) stderr %q", rt, r.code, r.stdout, want, r.stderr)
		}
		r = w.exec(t, nil, "--runtime", rt, "--code", "import scratchrun_hello")
		if r.code == 0 || !strings.Contains(r.stderr, "No module named 'scratchrun_hello'") {
			t.Errorf("%s: the package outlived its call: exit %d stderr %q", rt, r.code, r.stderr)
		}
	}

	// From a shell, as agents type it.
	r := w.exec(t, nil, append([]string{"--runtime", "bash", "--code",
		"pip install --quiet scratchrun-hello && python3 -c 'import scratchrun_hello; print(scratchrun_hello.GREETING)'"}, pipEnv...)...)
	if r.code != 0 || r.stdout != "hello from the index\n" {
		t.Errorf("bash pip install: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}

	r = w.exec(t, nil, "--runtime", "bash", "--code", `set -e
cd /tmp && npm install --silent --registry `+indexURL+`/npm/ scratchrun-hello
node -e "console.log(require('scratchrun-hello').greeting)"
npm install --silent -g --registry `+indexURL+`/npm/ scratchrun-hello
ls /usr/lib/node_modules/scratchrun-hello/index.js`)
	if want := "hello from npm\n/usr/lib/node_modules/scratchrun-hello/index.js\n"; r.code != 0 || r.stdout != want {
		t.Errorf("npm install: exit %d stdout %q (want %q) stderr %q", r.code, r.stdout, want, r.stderr)
	}
	r = w.exec(t, nil, "--runtime", "bash", "--code", "ls /usr/lib/node_modules")
	if r.code != 0 || strings.Contains(r.stdout, "scratchrun-hello") {
		t.Errorf("the global npm package outlived its call: exit %d stdout %q", r.code, r.stdout)
	}

	// 24 MiB does not fit a 16 MiB writable layer: pip fails, and the note
	// says why.
	r = w.exec(t, []string{"SCRATCHRUN_WRITABLE_MB=16"}, append([]string{"--runtime", "bash", "--code", "pip install --quiet scratchrun-big"}, pipEnv...)...)
	if r.code == 0 || !strings.Contains(r.stderr, "No space left on device") ||
		!strings.Contains(r.stderr, "scratchrun: note: The program reported \"No space left on device\": a sandbox may write 128 MiB to /tmp (and as much to /code and to /dev/shm) and 16 MiB everywhere else") {
		t.Errorf("over the writable layer: exit %d stderr %q", r.code, r.stderr)
	}
}

// A program that fills the writable layer (or /tmp) and says "No space left
// on device" gets a note with the sizes it may write.
func TestNoSpaceNote(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary, as root, on the installed images")
	t.Setenv("SCRATCHRUN_WRITABLE_MB", "16")
	for _, c := range []struct{ runtime, code string }{
		{"bash", "head -c 32M /dev/zero > /var/big"},
		{"python3.13", "open('/tmp/big', 'wb').write(bytes(200 << 20))"},
		{"node20", "require('fs').writeFileSync('/usr/big', Buffer.alloc(32 << 20))"},
	} {
		r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", c.runtime, "--memory-mb", "512", "--code", c.code)
		want := "scratchrun: note: The program reported \"No space left on device\": a sandbox may write 128 MiB to /tmp (and as much to /code and to /dev/shm) and 16 MiB everywhere else"
		if r.code == 0 || !strings.Contains(r.stderr, want) {
			t.Errorf("%s: exit %d stderr %q", c.runtime, r.code, r.stderr)
		}
	}
	if r := scratchrun(t, t.TempDir(), "", "exec", "--runtime", "bash", "--code", "echo fine"); strings.Contains(r.stderr, "No space") {
		t.Errorf("a run with room got the note: %q", r.stderr)
	}
}
