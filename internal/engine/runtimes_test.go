package engine

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// Each runtime prints, reads an input file and writes a returned file.
func TestEachRuntimePrintsReadsAndWrites(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		cases := []struct {
			runtime, code string
		}{
			{"python3.13", "import sys\ndata = open('/tmp/in.txt').read()\nprint('py', sys.version_info[:2], data.upper())\nopen('/tmp/out.txt', 'w').write(data[::-1])\n"},
			{"python3.11", "import sys\ndata = open('/tmp/in.txt').read()\nprint('py', sys.version_info[:2], data.upper())\nopen('/tmp/out.txt', 'w').write(data[::-1])\n"},
			{"node20", "const fs = require('fs');\nconst d = fs.readFileSync('/tmp/in.txt', 'utf8');\nconsole.log('node', process.versions.node.split('.')[0], d.toUpperCase());\nfs.writeFileSync('/tmp/out.txt', d.split('').reverse().join(''));\n"},
			{"bash", "d=$(cat /tmp/in.txt)\necho bash ${BASH_VERSINFO[0]} ${d^^}\nprintf '%s' \"$d\" | rev > /tmp/out.txt || printf '%s' \"$d\" | awk '{for(i=length;i>0;i--) printf substr($0,i,1)}' > /tmp/out.txt\n"},
		}
		wantVersion := map[string]string{"python3.13": "(3, 13)", "python3.11": "(3, 11)", "node20": "node 20", "bash": "bash 5"}
		for _, c := range cases {
			t.Run(c.runtime, func(t *testing.T) {
				requireRuntime(t, c.runtime)
				res := run(t, e, execapi.Request{
					Runtime: c.runtime, Code: c.code,
					Files:       map[string]string{"/tmp/in.txt": "hello"},
					ReturnFiles: []string{"/tmp/out.txt"},
				})
				if res.ExitCode != 0 {
					t.Fatalf("exit %d, stderr %q, note %q", res.ExitCode, res.Stderr, res.Note)
				}
				if !strings.Contains(res.Stdout, "HELLO") || !strings.Contains(res.Stdout, wantVersion[c.runtime]) {
					t.Errorf("stdout %q lacks HELLO or %q", res.Stdout, wantVersion[c.runtime])
				}
				got, _ := base64.StdEncoding.DecodeString(res.Files["/tmp/out.txt"])
				if string(got) != "olleh" {
					t.Errorf("returned /tmp/out.txt = %q, want %q (note %q)", got, "olleh", res.Note)
				}
			})
		}
	})
}

// chartCode is the README's chart example.
const chartCode = `import numpy as np
import matplotlib.pyplot as plt
x = np.linspace(0, 2 * np.pi, 200)
plt.plot(x, np.sin(x), label="sin")
plt.plot(x, np.cos(x), label="cos")
plt.legend()
plt.title("ScratchRun")
plt.savefig("/tmp/chart.png", dpi=80)
print("saved")
`

// The matplotlib chart comes back as a real PNG, with the Agg backend and no
// font cache rebuilt in the sandbox.
func TestMatplotlibChartIsRealPNG(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		for _, rt := range []string{"python3.13", "python3.11"} {
			t.Run(rt, func(t *testing.T) {
				requireRuntime(t, rt)
				res := run(t, e, execapi.Request{Runtime: rt, Code: chartCode, ReturnFiles: []string{"/tmp/chart.png"}})
				if res.ExitCode != 0 || res.Stdout != "saved\n" {
					t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
				if strings.Contains(res.Stderr, "font cache") {
					t.Errorf("matplotlib rebuilt its font cache in the sandbox: %q", res.Stderr)
				}
				data, err := base64.StdEncoding.DecodeString(res.Files["/tmp/chart.png"])
				if err != nil {
					t.Fatal(err)
				}
				img, err := png.Decode(bytes.NewReader(data))
				if err != nil {
					t.Fatalf("returned chart is not a PNG: %v", err)
				}
				if b := img.Bounds(); b.Dx() < 100 || b.Dy() < 100 {
					t.Errorf("chart is only %v", b)
				}
			})
		}
	})
}

// The Python images carry the promised libraries.
func TestPythonLibraries(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		for _, rt := range []string{"python3.13", "python3.11"} {
			t.Run(rt, func(t *testing.T) {
				requireRuntime(t, rt)
				res := run(t, e, execapi.Request{Runtime: rt, Code: "import numpy, pandas, matplotlib, requests, scipy, PIL\nprint(matplotlib.get_backend())\n"})
				if res.ExitCode != 0 || !strings.EqualFold(strings.TrimSpace(res.Stdout), "agg") {
					t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
				}
			})
		}
	})
}

// The bash image has the usual command-line tools.
func TestBashTools(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		requireRuntime(t, "bash")
		res := run(t, e, execapi.Request{Runtime: "bash", Code: "set -e\nfor c in curl jq sed awk grep sort head tr; do command -v $c >/dev/null || { echo missing $c; exit 1; }; done\necho '{\"a\":[1,2]}' | jq -c '.a|add'\n"})
		if res.ExitCode != 0 || res.Stdout != "3\n" {
			t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}

// Env reaches the code; the engine's own environment does not.
func TestEnvReachesCodeAndHostEnvDoesNot(t *testing.T) {
	t.Setenv("SCRATCHRUN_TEST_HOST_SECRET", "do-not-leak")
	e := newTestEngine(t, nil)
	res := run(t, e, execapi.Request{Runtime: "bash", Code: "echo \"$API_TOKEN|$SCRATCHRUN_TEST_HOST_SECRET\"; cat /proc/1/environ | tr '\\0' '\\n'",
		Env: map[string]string{"API_TOKEN": "tok en=1"}})
	if !strings.HasPrefix(res.Stdout, "tok en=1|\n") {
		t.Errorf("stdout %q: want the request env and nothing of the host's", res.Stdout)
	}
	if strings.Contains(res.Stdout, "do-not-leak") {
		t.Errorf("host environment leaked into the sandbox: %q", res.Stdout)
	}
}

// The program's exit status is reported as it is.
func TestExitCodePassesThrough(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: "import sys\nprint('x', file=sys.stderr)\nsys.exit(7)"})
		if res.ExitCode != 7 || res.Stderr != "x\n" {
			t.Errorf("exit %d stderr %q, want 7 and x", res.ExitCode, res.Stderr)
		}
	})
}
