package settings

import (
	"fmt"
	"strings"
)

// RegenerateDocs is the command that writes the generated files anew.
const RegenerateDocs = "go run ./cmd/scratchrun settings --markdown > docs/configuration.md && go run ./cmd/scratchrun settings --env > deploy/scratchrun.env"

// Markdown is docs/configuration.md: the table of every setting.
func Markdown() string {
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from internal/settings/list.go; do not edit. Regenerate with:
     ` + RegenerateDocs + ` -->

Every operator setting of ` + "`scratchrun`" + `, from one declared list. A flag given on
the command line beats the environment variable, which beats the default; an empty
variable counts as unset. A bad value is refused at start, naming the flag or the
variable and what it takes. ` + "`scratchrun COMMAND --help`" + ` lists a command's settings;
` + "[`deploy/scratchrun.env`](../deploy/scratchrun.env)" + ` is the same list as a commented
environment file.

Commands: ` + "`serve --nats`" + ` is ` + "`serve`" + ` as a cluster's front end, with no engine of its own
(it refuses an engine's flags); ` + "`exec`" + ` runs one call, with no admission and no warm pool.
The queue wait's 0 is "no waiting" everywhere.

| setting | flag | environment | type | default | range | commands | meaning |
|---|---|---|---|---|---|---|---|
`)
	for _, s := range All {
		flag := ""
		if s.Flag != "" {
			flag = "`--" + s.Flag + "`"
		}
		env := ""
		if s.Env != "" {
			env = "`" + s.Env + "`"
		}
		def := DefaultText(s)
		if s.Default != "" && s.DefaultText == "" {
			def = "`" + def + "`"
		}
		cmds := commandsOf(s)
		if s.Pending {
			cmds = "none yet (" + pendingNote + "; then " + cmds + ")"
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", cell(s.Name), flag, env, s.Type, cell(def),
			cell(Allowed(s)), cell(cmds), cell(s.Help))
	}
	return b.String()
}

// pendingNote says of a Pending setting that this build does not read it.
const pendingNote = "declared ahead of the feature, not read by this build"

// commandsOf lists s's commands for the docs.
func commandsOf(s *Setting) string {
	cmds := make([]string, len(s.Commands))
	for i, c := range s.Commands {
		cmds[i] = string(c)
	}
	return strings.Join(cmds, ", ")
}

// capital starts a sentence.
func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// EnvFile is deploy/scratchrun.env: every setting that has a variable,
// commented out with its default and help, for systemd units
// (EnvironmentFile=) and packages.
func EnvFile() string {
	var b strings.Builder
	b.WriteString(`# ScratchRun's settings as environment variables, every one commented out
# with its default. Generated from internal/settings/list.go; do not edit.
# Regenerate with:
#   ` + RegenerateDocs + `
# A flag on the command line beats a variable here; an empty value is unset.
# docs/configuration.md has the same list as a table.
`)
	for _, s := range All {
		if s.Env == "" {
			continue
		}
		fmt.Fprintf(&b, "\n# %s.\n# %s; for %s.", capital(s.Help), capital(Allowed(s)), commandsOf(s))
		if s.Flag != "" {
			fmt.Fprintf(&b, " Flag --%s.", s.Flag)
		}
		if s.Pending {
			fmt.Fprintf(&b, "\n# %s: no command takes it yet.", capital(pendingNote))
		}
		if s.DefaultText != "" {
			fmt.Fprintf(&b, "\n# Default: %s.", s.DefaultText)
		}
		fmt.Fprintf(&b, "\n#%s=%s\n", s.Env, s.Default)
	}
	return b.String()
}

// EnvHelp lists, for a command's --help, the settings of cmds that have
// a variable and no flag (those with a flag are in the flags' list).
func EnvHelp(cmds ...Command) string {
	var b strings.Builder
	b.WriteString("\nenvironment (flags above name their variables; docs/configuration.md has all):\n")
	for _, s := range For(cmds...) {
		if s.Env == "" || s.Flag != "" {
			continue
		}
		fmt.Fprintf(&b, "  %s\n    \t%s (%s", s.Env, s.Help, Allowed(s))
		if d := DefaultText(s); d != "" {
			fmt.Fprintf(&b, "; default %s", d)
		}
		b.WriteString(")\n")
	}
	return b.String()
}
