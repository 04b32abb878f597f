package engine

import (
	"testing"

	"github.com/scratchrun/scratchrun/internal/execapi"
)

// HOME is writable on every isolation level, and a cold python3.13 finds the
// matplotlib font cache the image baked there: importing matplotlib writes
// nothing to stderr. (The ordinary user's case, where the image's /root is
// not the sandbox's, is tested with the real binary in cmd/scratchrun.)
func TestHomeIsWritableAndMatplotlibQuiet(t *testing.T) {
	forEachBackend(t, nil, func(t *testing.T, e *Engine) {
		res := run(t, e, execapi.Request{Runtime: "python3.13", Code: `import glob, os
baked = bool(glob.glob(os.path.expanduser("~/.cache/matplotlib/fontlist-*.json")))
import matplotlib, matplotlib.pyplot
open(os.path.expanduser("~/notes.txt"), "w").write("kept")
print(os.environ["HOME"], matplotlib.get_cachedir(), baked, open("/root/notes.txt").read())
`})
		if res.ExitCode != 0 || res.Stdout != "/root /root/.cache/matplotlib True kept\n" || res.Stderr != "" {
			t.Errorf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
		}
	})
}
