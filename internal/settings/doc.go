// Package settings is ScratchRun's one declared list of operator settings
// (list.go) and the one place they are read: each setting has a name, a
// flag and an environment variable (either may be absent), a type, a
// default, a range, the commands it applies to and a line of help, and
// flags, --help, docs/configuration.md and deploy/scratchrun.env are all
// generated from that list.
//
// Reading follows one rule for every setting: a flag given on the command
// line beats the environment, which beats the default; an empty variable
// counts as unset. Each type has one parse rule (parse.go), and a bad value
// is refused naming the flag or the variable it came from and what is
// allowed.
//
// The registry is a small one of our own over the standard flag package,
// in the style of Tailscale's envknob, rather than peterbourgon/ff: ff
// binds flags to variables (flag beats env beats default) but has no
// notion of a range, of which commands a setting applies to (serve and
// its cluster front end take different subsets of one flag set, and a
// front end refuses an engine's flag), or of a declared list to generate
// the configuration table and the environment file from, which are what
// this package is for; with those written here, what ff would add is a
// dozen lines of lookup.
//
// A setting may be declared Pending, ahead of the code that reads it (a
// feature built in steps): the docs list it, marked as not read yet, and
// no command line takes it until the step that reads it clears the mark.
//
// The package is a leaf (it imports only the standard library), so its
// defaults are literals: cmd/scratchrun's tests check them against the
// packages whose defaults they are.
package settings
