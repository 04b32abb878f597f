package settings

import (
	"flag"
	"io"
	"strings"
	"testing"
)

// A Pending setting is documented (marked as not read yet) but on no
// command line: no flag is defined, its variable is not read, and no
// --help lists it, so that no command takes a setting it would ignore.
func TestPendingSettingsAreOnNoCommandLine(t *testing.T) {
	var pending []*Setting
	for _, s := range All {
		if s.Pending {
			pending = append(pending, s)
		}
	}
	if len(pending) == 0 {
		t.Skip("no setting is pending")
	}
	env := map[string]string{}
	for _, s := range pending {
		if s.Env != "" {
			env[s.Env] = "not a value of any type"
		}
	}
	for _, cmd := range Commands {
		fs := flag.NewFlagSet(string(cmd), flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		set := Define(fs, cmd)
		// A bad value of a variable no command reads refuses nothing.
		if _, err := set.Resolve(func(k string) string { return env[k] }); err != nil {
			t.Errorf("%s read a pending variable: %v", cmd, err)
		}
		help := EnvHelp(cmd)
		for _, s := range pending {
			if s.Flag != "" && fs.Lookup(s.Flag) != nil {
				t.Errorf("%s defines --%s", cmd, s.Flag)
			}
			if s.Env != "" && strings.Contains(help, s.Env) {
				t.Errorf("%s --help lists %s", cmd, s.Env)
			}
		}
	}
	md, envFile := Markdown(), EnvFile()
	for _, s := range pending {
		if Lookup(s.Env) != s {
			t.Errorf("%s is not declared", s.Name)
		}
		row := md[strings.Index(md, "| "+s.Name+" |"):]
		row = row[:strings.Index(row, "\n")]
		if !strings.Contains(row, "none yet ("+pendingNote) || !strings.Contains(row, s.Help) {
			t.Errorf("docs row of %s: %s", s.Name, row)
		}
		block := envFile[:strings.Index(envFile, "#"+s.Env+"=")]
		block = block[strings.LastIndex(block, "\n\n"):]
		if s.Env != "" && !strings.Contains(block, capital(pendingNote)) {
			t.Errorf("environment file on %s: %s", s.Name, block)
		}
	}
}
