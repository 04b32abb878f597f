package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/scratchrun/scratchrun/internal/settings"
)

// parseInterspersed parses flags that may come before, between or after
// positional arguments (`exec --runtime bash script.sh --env A=b`), which the
// standard flag package stops at, and returns the positional ones.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		// After "--" everything is positional; flag.Parse has consumed it.
		if i := len(args) - len(rest) - 1; i >= 0 && args[i] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// listFlag collects a repeatable string flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// keyValue splits NAME=value, naming the flag in its error.
func keyValue(flagName, s string) (string, string, error) {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("--%s %q: want NAME=value", flagName, s)
	}
	return k, v, nil
}

// parseFlagsOnly parses the flags of a command that takes no arguments.
// When it returns false the command ends with code: 0 after -h, a usage
// error otherwise (an unexpected argument is named through usageError).
func parseFlagsOnly(fs *flag.FlagSet, args []string, usageError func(string) int) (code int, ok bool) {
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err), false
	}
	if len(positional) > 0 {
		return usageError(fmt.Sprintf("unexpected argument %q", positional[0])), false
	}
	return 0, true
}

// flagGiven reports whether the flag name was given on fs's command line,
// as opposed to holding its default (which may equal a given value).
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// withSettings defines the flags of cmds' settings on fs and prints, in
// its usage, the variables that have no flag after the flags.
func withSettings(fs *flag.FlagSet, head string, cmds ...settings.Command) *settings.Set {
	set := settings.Define(fs, cmds...)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), head)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), settings.EnvHelp(cmds...))
	}
	return set
}

// resolveSettings reads set's settings once fs is parsed, the errors as
// usage errors.
func resolveSettings(set *settings.Set, usageError func(string) int) (*settings.Values, int, bool) {
	v, err := set.Resolve(os.Getenv)
	if err != nil {
		return nil, usageError(err.Error()), false
	}
	return v, 0, true
}

// flagExit is the status after fs.Parse failed: 0 for -h, which is no error.
func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return exitUsage
}
