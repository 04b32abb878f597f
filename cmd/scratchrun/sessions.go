//go:build linux

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/scratchrun/scratchrun/internal/execapi"
	"github.com/scratchrun/scratchrun/internal/sessionrecord"
	"github.com/scratchrun/scratchrun/internal/store"
)

// The operator's view of code sessions, on the store as `scratchrun keys`
// works: the rows the server keeps (package sessionrecord). The CLI cannot
// reach the process that holds a session, so `end` asks, through the row,
// and the server ends it at its next poll.

// sessionHashShown is how many hex digits of an id hash the listing shows:
// enough to name one session to `end`.
const sessionHashShown = 12

// sessionsCompletion completes the sessions commands.
var sessionsCompletion = completion{subs: []subcommand{
	{"list", "open sessions", completion{settings: keysSettings, flags: []flagCompletion{
		flagOf("key", true, "one key's"), flagOf("all-keys", false, "every key's (the default)")}}},
	{"end", "ask the server to end sessions", completion{settings: keysSettings}},
}}

// cmdSessions lists and ends code sessions, on the server machine.
func cmdSessions(args []string) int {
	if len(args) == 0 {
		sessionsUsage()
		return exitUsage
	}
	switch args[0] {
	case "list":
		return sessionsList(args[1:])
	case "end":
		return sessionsEnd(args[1:])
	case "help", "-h", "--help":
		sessionsUsage()
		return 0
	default:
		fmt.Fprintf(os.Stderr, "scratchrun sessions: unknown subcommand %q\n\n", args[0])
		sessionsUsage()
		return exitUsage
	}
}

func sessionsUsage() {
	fmt.Fprint(os.Stderr, `usage: scratchrun sessions COMMAND [flags]

  list [--key ID|NAME | --all-keys]   open sessions (every key's unless --key)
  end HASH|ID...                      ask the server that holds each session to end it
                                      (HASH: the listing's id hash, or at least `+fmt.Sprint(store.MinSessionHashPrefix)+` of its digits)

Every command takes --db FILE|postgres://... (env SCRATCHRUN_DB; default `+defaultDBPath()+`).
`)
}

func sessionsError(sub string, err error) int {
	fmt.Fprintf(os.Stderr, "scratchrun sessions %s: %v\n", sub, err)
	return exitInternal
}

func sessionsUsageError(sub, msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun sessions %s: %s\n", sub, msg)
	return exitUsage
}

func sessionsList(args []string) int {
	fs, db := keysFlagSet("list")
	fs.Init("sessions list", fs.ErrorHandling())
	key := fs.String("key", "", "only this key's sessions (ID or name)")
	allKeys := fs.Bool("all-keys", false, "every key's sessions (the default)")
	if code, ok := parseFlagsOnly(fs, args, func(msg string) int { return sessionsUsageError("list", msg) }); !ok {
		return code
	}
	if *key != "" && *allKeys {
		return sessionsUsageError("list", "--key and --all-keys: give one")
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return sessionsError("list", err)
	}
	defer st.Close()
	names, err := keyNames(ctx, st)
	if err != nil {
		return sessionsError("list", err)
	}
	owner := ""
	if *key != "" {
		k, err := st.KeyByID(ctx, *key)
		if errors.Is(err, store.ErrNotFound) {
			k, err = st.ActiveKey(ctx, *key) // by name
		}
		if err != nil {
			return sessionsUsageError("list", fmt.Sprintf("--key %s: %v", *key, err))
		}
		owner = k.ID
	}
	rows, err := st.OpenCodeSessions(ctx, owner, *key == "")
	if err != nil {
		return sessionsError("list", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID HASH\tKEY\tRUNTIME\tWORKER\tCREATED\tEXPIRES\tSTATE")
	for _, r := range rows {
		state := "open"
		if r.EndRequested {
			state = "end requested"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", shortHash(r.IDHash), ownerName(names, r.Owner),
			r.Runtime, firstNonEmpty(r.Worker, "-"), r.Created.Format(time.DateTime), r.Expires.Format(time.DateTime), state)
	}
	tw.Flush()
	return 0
}

func sessionsEnd(args []string) int {
	fs, db := keysFlagSet("end")
	fs.Init("sessions end", fs.ErrorHandling())
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(positional) == 0 {
		return sessionsUsageError("end", "name at least one session: scratchrun sessions end HASH|ID...")
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return sessionsError("end", err)
	}
	defer st.Close()
	names, err := keyNames(ctx, st)
	if err != nil {
		return sessionsError("end", err)
	}
	code := 0
	for _, arg := range positional {
		hash := arg
		if execapi.IsSessionID(arg) {
			hash = store.HashSessionID(arg)
		}
		r, err := st.RequestCodeSessionEnd(ctx, hash)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun sessions end %s: %v\n", arg, err)
			code = exitInternal
			continue
		}
		fmt.Printf("asked the server to end session %s (key %s); it ends it within %s, at its next poll\n",
			shortHash(r.IDHash), ownerName(names, r.Owner), sessionrecord.DefaultPoll)
	}
	return code
}

// keyNames maps every key's id to its name, for the listings.
func keyNames(ctx context.Context, st *store.Store) (map[string]string, error) {
	keys, err := st.ListKeys(ctx)
	if err != nil {
		return nil, err
	}
	names := make(map[string]string, len(keys))
	for _, k := range keys {
		names[k.ID] = k.Name
	}
	return names, nil
}

// ownerName is how a listing names a session's owner.
func ownerName(names map[string]string, owner string) string {
	switch name, ok := names[owner]; {
	case owner == "":
		return "(no key)"
	case ok:
		return name
	}
	return owner // a key deleted from the store since
}

// shortHash is the part of an id hash the listings show.
func shortHash(h string) string { return h[:min(sessionHashShown, len(h))] }
