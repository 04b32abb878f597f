package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/scratchrun/scratchrun/internal/testenv"
)

// The deploy files (deploy/, and packaging/systemd for the units) start `scratchrun worker` and `scratchrun
// serve` with flags and environment variables: every one of them is one
// the command has (its --help names each flag and the variable behind it),
// so that a renamed flag cannot leave a unit or a manifest that fails to
// start.
func TestDeployFilesUseRealFlagsAndVariables(t *testing.T) {
	testenv.SkipIfShort(t, "drives the built binary")
	help := map[string]string{}
	for _, cmd := range []string{"worker", "serve"} {
		r := scratchrun(t, t.TempDir(), "", cmd, "--help")
		if r.code != 0 {
			t.Fatalf("%s --help: exit %d", cmd, r.code)
		}
		help[cmd] = r.stderr + r.stdout
	}
	flagRe := regexp.MustCompile(`(?:^|\s|")--([a-z][a-z0-9-]*)`)
	check := func(file, cmd, text string) {
		for _, m := range flagRe.FindAllStringSubmatch(text, -1) {
			if !strings.Contains(help[cmd], "  -"+m[1]+" ") && !strings.Contains(help[cmd], "  -"+m[1]+"\n") {
				t.Errorf("%s gives `scratchrun %s` the flag --%s, which it does not have", file, cmd, m[1])
			}
		}
	}
	read := func(path string) string {
		data, err := os.ReadFile(filepath.Join("../..", path))
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	argsOf := func(manifest, container string) string {
		text := read(manifest)
		start := strings.Index(text, "- name: "+container+"\n")
		if start < 0 {
			t.Fatalf("%s: no container %s", manifest, container)
		}
		text = text[start:]
		args := text[strings.Index(text, "args:"):]
		end := regexp.MustCompile(`\n\s*[a-z][A-Za-z]*:`).FindStringIndex(args[len("args:"):])
		return args[:len("args:")+end[0]]
	}
	check("deploy/kubernetes/worker-daemonset.yaml", "worker", argsOf("deploy/kubernetes/worker-daemonset.yaml", "worker"))
	check("deploy/kubernetes/frontend.yaml", "serve", argsOf("deploy/kubernetes/frontend.yaml", "frontend"))
	for unit, cmd := range map[string]string{"packaging/systemd/scratchrun-worker.service": "worker", "packaging/systemd/scratchrun-frontend.service": "serve", "packaging/systemd/scratchrun.service": "serve"} {
		for _, line := range strings.Split(read(unit), "\n") {
			if strings.HasPrefix(line, "ExecStart=") {
				check(unit, cmd, line)
			}
		}
	}
	envRe := regexp.MustCompile(`(?m)^#?(SCRATCHRUN_[A-Z0-9_]+)=`)
	for file, cmd := range map[string]string{"deploy/systemd/worker.env.example": "worker", "deploy/systemd/frontend.env.example": "serve"} {
		for _, m := range envRe.FindAllStringSubmatch(read(file), -1) {
			if !strings.Contains(help[cmd], m[1]) {
				t.Errorf("%s sets %s, which `scratchrun %s --help` does not name", file, m[1], cmd)
			}
		}
	}
}
