package settings

import "slices"

// Type is how a setting's text is read (parse.go holds one rule each).
type Type string

// The types a setting may have.
const (
	// Bool is 1, t, true, 0, f, false (strconv.ParseBool); a flag given
	// alone is true.
	Bool Type = "bool"
	// Int is a decimal integer within Min and Max.
	Int Type = "int"
	// Share is a fraction from 0 to 1.
	Share Type = "share"
	// Size is a number of bytes with an optional unit (B, KiB, MiB, GiB;
	// K/KB, M/MB, G/GB are binary too); a bare number is in the setting's
	// Unit.
	Size Type = "size"
	// Duration is a Go duration (2s, 500ms, 1m).
	Duration Type = "duration"
	// String is any text (a path, a name, a token).
	String Type = "string"
	// Enum is one of Allowed.
	Enum Type = "enum"
	// List is comma-separated words, blanks ignored.
	List Type = "list"
	// Addr is HOST:PORT.
	Addr Type = "addr"
	// IPs is IP addresses separated by commas or spaces.
	IPs Type = "ips"
	// Prefixes is CIDR prefixes or addresses separated by commas or spaces.
	Prefixes Type = "prefixes"
	// Prefix is one CIDR prefix.
	Prefix Type = "prefix"
	// URL is an http:// or https:// URL with a host.
	URL Type = "url"
)

// Command is a subcommand a setting applies to.
type Command string

// The commands settings apply to. Frontend is `serve --nats`: the same
// flag set as Serve, but no engine of its own. MCPClient is `mcp` built
// for macOS or Windows: the client of a server, with none of the engine's
// settings.
const (
	Exec Command = "exec"
	MCP  Command = "mcp"
	// MCPClient is named for the docs' column of commands.
	MCPClient Command = "mcp off Linux"
	Serve     Command = "serve"
	Frontend  Command = "serve --nats"
	Worker    Command = "worker"
	Bench     Command = "bench"
	Images    Command = "images"
	Keys      Command = "keys"
)

// Commands are every Command, in the order the docs list them.
var Commands = []Command{Exec, MCP, MCPClient, Serve, Frontend, Worker, Bench, Images, Keys}

// Setting is one operator setting.
type Setting struct {
	// Name identifies the setting in the docs: its flag's name, or its
	// variable's without SCRATCHRUN_ when it has no flag.
	Name string
	// Flag is the flag's name without dashes ("" when the setting has no
	// flag: secrets, and settings no one changes per run).
	Flag string
	// Env is the environment variable ("" when there is none: a flag
	// that only makes sense on one command line).
	Env string
	// Type is how the value is read.
	Type Type
	// Default is the value when neither flag nor variable is given, as
	// text Type's rule reads; "" for none (the zero value), when the
	// package that takes the setting decides (DefaultText says how).
	Default string
	// DefaultText describes a default that is not a literal (the
	// machine's memory, the user's directory); it replaces Default in the
	// docs and --help.
	DefaultText string
	// Min and Max bound an Int (its value), a Size (bytes) or a Duration
	// (nanoseconds); Max 0 is no bound.
	Min, Max int64
	// Unit is what a bare Size number counts ("MiB"; "" for bytes), and
	// what an Int counts, for the docs ("ms", "MiB").
	Unit string
	// Allowed are an Enum's values.
	Allowed []string
	// Zero says what the value 0 (or empty) means when that is not
	// plain ("no waiting", "off").
	Zero string
	// Meta names the value in --help (`HOST:PORT`, `FILE`).
	Meta string
	// Commands are where the setting applies.
	Commands []Command
	// Help is one line for --help and the docs, describing the setting
	// as it works once read (not while Pending).
	Help string
	// Pending is a setting declared ahead of the code that reads it (a
	// feature built in steps): the docs and the environment file list it,
	// marked as not read yet, but no command defines its flag, reads its
	// variable or lists it in --help, so that no command takes a setting
	// it would ignore. The step that reads it clears Pending.
	Pending bool
}

// AppliesTo reports whether s is read by cmd.
func (s *Setting) AppliesTo(cmd Command) bool { return slices.Contains(s.Commands, cmd) }

// Source is where a resolved value came from.
type Source int

// Where a value came from, in the order they win.
const (
	FromDefault Source = iota
	FromEnv
	FromFlag
)

// For returns the settings that apply to any of cmds, in list order
// (none that is Pending).
func For(cmds ...Command) []*Setting {
	var out []*Setting
	for _, s := range All {
		if s.Pending {
			continue
		}
		for _, c := range cmds {
			if s.AppliesTo(c) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// Lookup finds the setting whose flag or variable is name.
func Lookup(name string) *Setting {
	for _, s := range All {
		if name != "" && (s.Flag == name || s.Env == name) {
			return s
		}
	}
	return nil
}
