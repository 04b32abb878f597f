package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// completionFile writes shell's script into a temporary file.
func completionFile(t *testing.T, shell string) string {
	t.Helper()
	script, ok := completionScript(shell)
	if !ok {
		t.Fatalf("no script for %s", shell)
	}
	f := filepath.Join(t.TempDir(), "scratchrun."+shell)
	if err := os.WriteFile(f, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// needShell skips when shell is not installed: scripts/test.sh installs
// bash, zsh and fish, so CI runs these.
func needShell(t *testing.T, shell string) string {
	t.Helper()
	p, err := exec.LookPath(shell)
	if err != nil {
		t.Skipf("%s is not installed (scripts/test.sh installs it): its completion is not tried", shell)
	}
	return p
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// firstFields cuts fish's descriptions (after a tab) off each line.
func firstFields(ls []string) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i], _, _ = strings.Cut(l, "\t")
	}
	return out
}

// completionCases are command lines with the cursor at the end and what
// completing there must offer (exactly, for bash and fish, which filter
// by the word typed).
var completionCases = []struct {
	line string
	want []string
}{
	{"scratchrun serve --iso", []string{"--isolation"}},
	{"scratchrun serve --isolation ", []string{"gvisor", "microvm", "namespaces"}},
	{"scratchrun worker --network-default ", []string{"egress", "none"}},
	{"scratchrun images p", []string{"prune", "pull", "push"}},
	{"scratchrun keys create --na", []string{"--name"}},
	{"scratchrun exec --network ", []string{"egress", "none"}},
	{"scratchrun completion ", []string{"bash", "fish", "zsh"}},
	{"scratchrun vers", []string{"version"}},
}

// bashWords splits a line as COMP_WORDS holds it: a trailing blank is an
// empty current word.
func bashWords(line string) []string {
	w := strings.Fields(line)
	if strings.HasSuffix(line, " ") {
		w = append(w, "")
	}
	return w
}

func TestCompletionBash(t *testing.T) {
	bash := needShell(t, "bash")
	f := completionFile(t, "bash")
	for _, c := range completionCases {
		words := bashWords(c.line)
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		script := "source " + f + "; COMP_WORDS=(" + strings.Join(quoted, " ") + "); COMP_CWORD=" +
			itoa(len(words)-1) + `; _scratchrun; printf '%s\n' "${COMPREPLY[@]}"`
		out, err := exec.Command(bash, "--norc", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", c.line, err, out)
		}
		got := lines(string(out))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("bash %q: got %q, want %q", c.line, got, c.want)
		}
	}
}

func TestCompletionFish(t *testing.T) {
	fish := needShell(t, "fish")
	f := completionFile(t, "fish")
	if out, err := exec.Command(fish, "--no-config", "-n", f).CombinedOutput(); err != nil {
		t.Fatalf("fish -n: %v: %s", err, out)
	}
	for _, c := range completionCases {
		out, err := exec.Command(fish, "--no-config", "-c", "source "+f+"; complete -C "+fishQuote(c.line)).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", c.line, err, out)
		}
		got := firstFields(lines(string(out)))
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("fish %q: got %q, want %q", c.line, got, c.want)
		}
	}
}

// zsh's completion system needs a terminal to drive; the function runs
// here with compadd and _files standing in, and what it would offer
// (before zsh filters by the word typed) must hold what is wanted.
func TestCompletionZsh(t *testing.T) {
	zsh := needShell(t, "zsh")
	f := completionFile(t, "zsh")
	if out, err := exec.Command(zsh, "-n", f).CombinedOutput(); err != nil {
		t.Fatalf("zsh -n: %v: %s", err, out)
	}
	stubs := `compdef() { :; }; compadd() { [[ $1 == -- ]] && shift; print -l -- "$@"; }; _files() { print -- '(files)'; }; `
	for _, c := range completionCases {
		words := bashWords(c.line)
		quoted := make([]string, len(words))
		for i, w := range words {
			quoted[i] = "'" + w + "'"
		}
		script := stubs + "source " + f + "; words=(" + strings.Join(quoted, " ") + "); CURRENT=" + itoa(len(words)) + "; _scratchrun"
		out, err := exec.Command(zsh, "-f", "-c", script).CombinedOutput()
		if err != nil {
			t.Fatalf("%q: %v: %s", c.line, err, out)
		}
		got := lines(string(out))
		cur := words[len(words)-1]
		var offered []string
		for _, g := range got {
			if strings.HasPrefix(g, cur) {
				offered = append(offered, g)
			}
		}
		slices.Sort(offered)
		if !slices.Equal(offered, c.want) {
			t.Errorf("zsh %q: offers %q (of %q), want %q", c.line, offered, got, c.want)
		}
	}
	// A flag's free value is a file name.
	script := stubs + "source " + f + "; words=(scratchrun serve --db ''); CURRENT=4; _scratchrun"
	if out, err := exec.Command(zsh, "-f", "-c", script).CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != "(files)" {
		t.Errorf("zsh: serve --db offers %q (%v), want files", out, err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// The scripts write commands, flags and values unquoted: each must be a
// plain word.
func TestCompletionWordsArePlain(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	for _, n := range completionTree() {
		words := append(n.subNames(), n.args...)
		for _, f := range flagsOf(n.completion) {
			words = append(words, f.name)
			words = append(words, f.values...)
		}
		for _, w := range words {
			if !plain.MatchString(w) {
				t.Errorf("%s: %q is not a plain word", n.key(), w)
			}
		}
	}
}

// helpFlag is a flag line of flag.PrintDefaults: "  -name" for a bool,
// "  -name VALUE" for one that takes a value.
var helpFlag = regexp.MustCompile(`(?m)^  -([a-z0-9-]+)( .+)?$`)

// Every flag a command's --help lists is completed, taking a value when
// it does, and nothing else is: the hand-written lists of the commands'
// own flags (completion.go) stay those of their flag sets.
func TestCompletionFlagsMatchHelp(t *testing.T) {
	for _, n := range completionTree()[1:] {
		if len(n.subs) > 0 {
			continue // images, keys: their subcommands have the flags
		}
		r := asCLI(t, nil, append(slices.Clone(n.path), "--help")...)
		if r.code != 0 {
			t.Errorf("%s --help: exit %d: %s", n.key(), r.code, r.stderr)
			continue
		}
		help := map[string]bool{}
		for _, m := range helpFlag.FindAllStringSubmatch(r.stderr, -1) {
			help[m[1]] = m[2] != ""
		}
		completed := map[string]bool{}
		for _, f := range flagsOf(n.completion) {
			completed[f.name] = f.value
			if takes, ok := help[f.name]; !ok {
				t.Errorf("%s: completes --%s, which its --help does not list", n.key(), f.name)
			} else if takes != f.value {
				t.Errorf("%s --%s: takes a value %v in --help, %v in the completion", n.key(), f.name, takes, f.value)
			}
		}
		for name := range help {
			if _, ok := completed[name]; !ok {
				t.Errorf("%s: --%s is in its --help but not completed", n.key(), name)
			}
		}
	}
}

// Every command the usage lists is completed at the top.
func TestCompletionHasEveryCommand(t *testing.T) {
	r := asCLI(t, nil, "help")
	top := completionTree()[0].subNames()
	for _, c := range commands {
		if c.summary == "" {
			continue
		}
		if !strings.Contains(r.stderr, "\n  "+c.name+" ") {
			t.Errorf("the usage does not list %s", c.name)
		}
		if !slices.Contains(top, c.name) {
			t.Errorf("%s is not completed", c.name)
		}
	}
}

// Every images subcommand is completed (a new one added to the dispatch
// and not here fails).
func TestCompletionHasEveryImagesCommand(t *testing.T) {
	var offered []string
	for _, sub := range imagesCompletion.subs {
		offered = append(offered, sub.name)
	}
	for _, c := range imagesCommands {
		if !slices.Contains(offered, c.name) {
			t.Errorf("images %s is not completed (offered: %v)", c.name, offered)
		}
	}
}

func TestCompletionBadShell(t *testing.T) {
	r := asCLI(t, nil, "completion", "tcsh")
	if r.code != exitUsage || !strings.Contains(r.stderr, `"tcsh"`) || !strings.Contains(r.stderr, "bash, zsh, fish") || r.stdout != "" {
		t.Errorf("completion tcsh: exit %d, stdout %q, stderr %q; want a usage error naming tcsh and bash, zsh, fish", r.code, r.stdout, r.stderr)
	}
	if r := asCLI(t, nil, "completion"); r.code != exitUsage || !strings.Contains(r.stderr, "bash, zsh, fish") {
		t.Errorf("completion with no shell: exit %d, stderr %q", r.code, r.stderr)
	}
	if r := asCLI(t, nil, "completion", "bash"); r.code != 0 || !strings.Contains(r.stdout, "complete -o default -F _scratchrun scratchrun") {
		t.Errorf("completion bash: exit %d, stderr %q", r.code, r.stderr)
	}
}
