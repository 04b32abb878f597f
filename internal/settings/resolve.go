package settings

import (
	"flag"
	"fmt"
	"net/netip"
	"sort"
	"time"
)

// Set is the settings of one command line: the flags Define put on its
// flag set, read with the environment once the flags are parsed.
type Set struct {
	cmds  []Command
	flags map[*Setting]*rawFlag
}

// rawFlag keeps a flag's text for Resolve, which reads flag and variable
// by the same rule.
type rawFlag struct {
	s     *Setting
	text  string
	given bool
}

func (f *rawFlag) String() string {
	if f == nil {
		return ""
	}
	return f.text
}

// Set keeps the text: Resolve reads it by the same rule as a variable's.
func (f *rawFlag) Set(v string) error {
	f.text, f.given = v, true
	return nil
}

// IsBoolFlag lets a Bool flag be given alone (--allow-egress).
func (f *rawFlag) IsBoolFlag() bool { return f.s.Type == Bool }

// Define puts on fs the flag of every setting that applies to any of
// cmds (serve's flag set holds Serve's and Frontend's), with usage from
// the list: its help, its variable and its default.
func Define(fs *flag.FlagSet, cmds ...Command) *Set {
	set := &Set{cmds: cmds, flags: map[*Setting]*rawFlag{}}
	for _, s := range For(cmds...) {
		if s.Flag == "" {
			continue
		}
		f := &rawFlag{s: s}
		set.flags[s] = f
		fs.Var(f, s.Flag, Usage(s))
	}
	return set
}

// Usage is a flag's usage line: the help, the value's name (in
// backquotes, which flag shows as the placeholder), the variable and the
// default.
func Usage(s *Setting) string {
	u := s.Help
	var notes []string
	if s.Type != Bool {
		meta := s.Meta
		if meta == "" {
			meta = metaOf(s)
		}
		notes = append(notes, "`"+meta+"`")
	}
	if s.Env != "" {
		notes = append(notes, "env "+s.Env)
	}
	if d := DefaultText(s); d != "" {
		notes = append(notes, "default "+d)
	}
	if s.Zero != "" {
		notes = append(notes, "0: "+s.Zero)
	}
	if len(notes) > 0 {
		u += " (" + join(notes, "; ") + ")"
	}
	return u
}

func metaOf(s *Setting) string {
	switch s.Type {
	case Int:
		return "N"
	case Share:
		return "SHARE"
	case Size:
		return "SIZE"
	case Duration:
		return "DURATION"
	case Enum:
		return join(s.Allowed, "|")
	case List:
		return "LIST"
	case Addr:
		return "HOST:PORT"
	case URL:
		return "URL"
	}
	return "VALUE"
}

func join(words []string, sep string) string {
	out := ""
	for i, w := range words {
		if i > 0 {
			out += sep
		}
		out += w
	}
	return out
}

// DefaultText is the default as the docs show it ("" when there is none).
func DefaultText(s *Setting) string {
	if s.DefaultText != "" {
		return s.DefaultText
	}
	return s.Default
}

// Resolve reads every setting of the set's commands: the flag when it
// was given, else the variable when getenv has it non-empty, else the
// default. The first bad value ends it, named by its flag or variable.
func (set *Set) Resolve(getenv func(string) string) (*Values, error) {
	v := &Values{cmds: set.cmds, vals: map[*Setting]any{}, from: map[*Setting]Source{}}
	for _, s := range For(set.cmds...) {
		text, from, name := s.Default, FromDefault, "the default of "+s.Name
		if f := set.flags[s]; f != nil && f.given {
			text, from, name = f.text, FromFlag, "--"+s.Flag
		} else if e := envOf(s, getenv); e != "" {
			text, from, name = e, FromEnv, s.Env
		}
		if text == "" {
			continue
		}
		val, err := parse(s, text)
		switch {
		case err == errNegative:
			return nil, fmt.Errorf("%s must not be negative (got %s)", name, text)
		case err != nil && from == FromFlag:
			return nil, fmt.Errorf("%s %q: %v", name, text, err)
		case err != nil:
			return nil, fmt.Errorf("%s=%q: %v", name, text, err)
		}
		v.vals[s], v.from[s] = val, from
	}
	return v, nil
}

func envOf(s *Setting, getenv func(string) string) string {
	if s.Env == "" {
		return ""
	}
	return getenv(s.Env)
}

// Given lists the flags given on the command line whose settings do not
// apply to cmd, sorted as flag.Visit sorts them: serve refuses an engine's
// flags when it is a front end.
func (set *Set) Given(notFor Command) []string {
	var out []string
	for s, f := range set.flags {
		if f.given && !s.AppliesTo(notFor) {
			out = append(out, s.Flag)
		}
	}
	sort.Strings(out)
	return out
}

// Values are the resolved settings of one command.
type Values struct {
	cmds []Command
	vals map[*Setting]any
	from map[*Setting]Source
}

// From says where s's value came from (FromDefault also when it has none).
func (v *Values) From(s *Setting) Source { return v.from[s] }

// IsSet reports whether s was given by flag or variable.
func (v *Values) IsSet(s *Setting) bool { return v.from[s] != FromDefault }

// get returns s's value, or nil when it has none. Reading a setting that
// does not apply to the command is a mistake in the list or its reader,
// which the commands' tests find.
func (v *Values) get(s *Setting) any {
	for _, c := range v.cmds {
		if s.AppliesTo(c) {
			return v.vals[s]
		}
	}
	panic(fmt.Sprintf("settings: %s is read by %v, which it does not apply to", s.Name, v.cmds))
}

// Bool is a Bool setting's value.
func (v *Values) Bool(s *Setting) bool { b, _ := v.get(s).(bool); return b }

// Int is an Int setting's value.
func (v *Values) Int(s *Setting) int { return int(v.Int64(s)) }

// Int64 is an Int setting's value.
func (v *Values) Int64(s *Setting) int64 { n, _ := v.get(s).(int64); return n }

// Share is a Share setting's value.
func (v *Values) Share(s *Setting) float64 { f, _ := v.get(s).(float64); return f }

// Size is a Size setting's value in bytes.
func (v *Values) Size(s *Setting) int64 { n, _ := v.get(s).(int64); return n }

// Duration is a Duration setting's value.
func (v *Values) Duration(s *Setting) time.Duration { d, _ := v.get(s).(time.Duration); return d }

// String is the value of a String, Enum, Addr or URL setting.
func (v *Values) String(s *Setting) string { t, _ := v.get(s).(string); return t }

// List is a List setting's value.
func (v *Values) List(s *Setting) []string { l, _ := v.get(s).([]string); return l }

// IPs is an IPs setting's value.
func (v *Values) IPs(s *Setting) []netip.Addr { l, _ := v.get(s).([]netip.Addr); return l }

// Prefixes is a Prefixes setting's value.
func (v *Values) Prefixes(s *Setting) []netip.Prefix { l, _ := v.get(s).([]netip.Prefix); return l }

// Prefix is a Prefix setting's value.
func (v *Values) Prefix(s *Setting) netip.Prefix { p, _ := v.get(s).(netip.Prefix); return p }

// Environment resolves cmds' settings from the environment alone, for
// commands whose flag sets hold none of them.
func Environment(getenv func(string) string, cmds ...Command) (*Values, error) {
	return (&Set{cmds: cmds}).Resolve(getenv)
}
