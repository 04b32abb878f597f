//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/scratchrun/scratchrun/internal/settings"
	"github.com/scratchrun/scratchrun/internal/store"
)

// Defaults of a new key's limits.
const (
	defaultKeyRate        = store.DefaultRatePerMin
	defaultKeyConcurrency = store.DefaultConcurrency
)

// cmdKeys manages API keys and reports usage, on the server machine.
func cmdKeys(args []string) int {
	if len(args) == 0 {
		keysUsage()
		return exitUsage
	}
	switch args[0] {
	case "create":
		return keysCreate(args[1:])
	case "list":
		return keysList(args[1:])
	case "revoke":
		return keysRevoke(args[1:])
	case "set":
		return keysSet(args[1:])
	case "usage":
		return keysUsageReport(args[1:])
	case "help", "-h", "--help":
		keysUsage()
		return 0
	default:
		fmt.Fprintf(os.Stderr, "scratchrun keys: unknown subcommand %q\n\n", args[0])
		keysUsage()
		return exitUsage
	}
}

func keysUsage() {
	fmt.Fprint(os.Stderr, `usage: scratchrun keys COMMAND [flags]

  create --name NAME [--rate N/min] [--concurrency N]   make a key; it is printed once, on the last line
  list                                                 every key (never the secret)
  revoke ID|NAME                                       refuse the key from the next request on
  set ID|NAME [--rate N/min] [--concurrency N]         change a key's limits (calls in flight go on)
  usage [--key ID|NAME] [--since 24h|2025-01-31] [--runs]   runs, time and bytes per key

Every command takes --db FILE|postgres://... (env SCRATCHRUN_DB; default `+defaultDBPath()+`).
`)
}

func keysError(sub string, err error) int {
	fmt.Fprintf(os.Stderr, "scratchrun keys %s: %v\n", sub, err)
	return exitInternal
}

func keysUsageError(sub, msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun keys %s: %s\n", sub, msg)
	return exitUsage
}

// keysFlagSet is a flag set with the keys commands' settings (--db).
func keysFlagSet(sub string) (*flag.FlagSet, *settings.Set) {
	fs := flag.NewFlagSet("keys "+sub, flag.ContinueOnError)
	return fs, settings.Define(fs, settings.Keys)
}

// openKeys opens the key store --db (or SCRATCHRUN_DB) names.
func openKeys(ctx context.Context, set *settings.Set) (*store.Store, error) {
	v, err := set.Resolve(os.Getenv)
	if err != nil {
		return nil, err
	}
	return store.Open(ctx, firstNonEmpty(v.String(settings.DB), defaultDBPath()))
}

func keysCreate(args []string) int {
	fs, db := keysFlagSet("create")
	name := fs.String("name", "", "a label for the key, unique among active keys (required)")
	rate := fs.String("rate", strconv.Itoa(defaultKeyRate)+"/min", "runs the key may start per minute, as `N/min` or N")
	conc := fs.Int("concurrency", defaultKeyConcurrency, "requests of the key in flight at once")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(positional) > 0 {
		return keysUsageError("create", fmt.Sprintf("unexpected argument %q (the name goes in --name)", positional[0]))
	}
	if *name == "" {
		return keysUsageError("create", "--name is required")
	}
	perMin, err := parseRate(*rate)
	if err != nil {
		return keysUsageError("create", "--rate: "+err.Error())
	}
	if *conc <= 0 {
		return keysUsageError("create", fmt.Sprintf("--concurrency %d: must be at least 1", *conc))
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return keysError("create", err)
	}
	defer st.Close()
	k, secret, err := st.CreateKey(ctx, store.NewKey{Name: *name, RatePerMin: perMin, Concurrency: *conc})
	if err != nil {
		return keysUsageError("create", err.Error())
	}
	fmt.Printf("created key %s (%s): %d runs/min, %d at once\n", k.ID, k.Name, k.RatePerMin, k.Concurrency)
	fmt.Println("the key is shown this once; store it now (only its hash is kept):")
	fmt.Println(secret)
	return 0
}

// parseRate reads "N/min" or "N" (per minute).
func parseRate(s string) (int, error) {
	t := strings.TrimSpace(s)
	t = strings.TrimSuffix(strings.TrimSuffix(t, "/min"), "/m")
	n, err := strconv.Atoi(t)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a positive number of runs per minute, e.g. 60/min", s)
	}
	return n, nil
}

func keysList(args []string) int {
	fs, db := keysFlagSet("list")
	if code, ok := parseFlagsOnly(fs, args, func(msg string) int { return keysUsageError("list", msg) }); !ok {
		return code
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return keysError("list", err)
	}
	defer st.Close()
	keys, err := st.ListKeys(ctx)
	if err != nil {
		return keysError("list", err)
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tKEY\tRATE\tCONCURRENCY\tCREATED\tSTATUS")
	for _, k := range keys {
		status := "active"
		if !k.Active() {
			status = "revoked " + k.Revoked.Format(time.DateTime)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s...\t%d/min\t%d\t%s\t%s\n", k.ID, k.Name, k.Prefix, k.RatePerMin, k.Concurrency, k.Created.Format(time.DateTime), status)
	}
	tw.Flush()
	return 0
}

func keysRevoke(args []string) int {
	fs, db := keysFlagSet("revoke")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(positional) != 1 {
		return keysUsageError("revoke", "name exactly one key: scratchrun keys revoke ID|NAME")
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return keysError("revoke", err)
	}
	defer st.Close()
	k, err := st.Revoke(ctx, positional[0])
	if err != nil {
		return keysError("revoke", err)
	}
	fmt.Printf("revoked key %s (%s); requests that present it are refused from now on\n", k.ID, k.Name)
	return 0
}

func keysSet(args []string) int {
	fs, db := keysFlagSet("set")
	rate := fs.String("rate", "", "runs the key may start per minute, as `N/min` or N (default: unchanged)")
	conc := fs.Int("concurrency", 0, "requests of the key in flight at once (default: unchanged)")
	positional, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(positional) != 1 {
		return keysUsageError("set", "name exactly one key: scratchrun keys set ID|NAME [--rate N/min] [--concurrency N]")
	}
	var change store.LimitChange
	if *rate != "" {
		if change.RatePerMin, err = parseRate(*rate); err != nil {
			return keysUsageError("set", "--rate: "+err.Error())
		}
	}
	if flagGiven(fs, "concurrency") && *conc <= 0 {
		return keysUsageError("set", fmt.Sprintf("--concurrency %d: must be at least 1", *conc))
	}
	change.Concurrency = *conc
	if change == (store.LimitChange{}) {
		return keysUsageError("set", "nothing to change: give --rate, --concurrency or both")
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return keysError("set", err)
	}
	defer st.Close()
	k, err := st.SetLimits(ctx, positional[0], change)
	if err != nil {
		return keysError("set", err)
	}
	fmt.Printf("key %s (%s): %d runs/min, %d at once; calls in flight go on\n", k.ID, k.Name, k.RatePerMin, k.Concurrency)
	return 0
}

func keysUsageReport(args []string) int {
	fs, db := keysFlagSet("usage")
	keyRef := fs.String("key", "", "only this key, by `ID|NAME` (a name also matches revoked keys of that name)")
	since := fs.String("since", "", "only runs started since `WHEN`: a duration back (24h, 90m), a date (2025-01-31) or RFC 3339 time")
	runs := fs.Bool("runs", false, "list each run instead of totals per key")
	if code, ok := parseFlagsOnly(fs, args, func(msg string) int { return keysUsageError("usage", msg) }); !ok {
		return code
	}
	var filter store.UsageFilter
	var err error
	if *since != "" {
		if filter.Since, err = parseSince(*since, time.Now()); err != nil {
			return keysUsageError("usage", "--since: "+err.Error())
		}
	}
	ctx := context.Background()
	st, err := openKeys(ctx, db)
	if err != nil {
		return keysError("usage", err)
	}
	defer st.Close()
	keys, err := st.ListKeys(ctx)
	if err != nil {
		return keysError("usage", err)
	}
	names := map[string]string{"": "(no key)"}
	for _, k := range keys {
		names[k.ID] = k.Name
	}
	if *keyRef != "" {
		filter.KeyIDs = []string{}
		for _, k := range keys {
			if k.ID == *keyRef || k.Name == *keyRef {
				filter.KeyIDs = append(filter.KeyIDs, k.ID)
			}
		}
		if len(filter.KeyIDs) == 0 {
			return keysUsageError("usage", fmt.Sprintf("--key %q: no key has that id or name", *keyRef))
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	defer tw.Flush()
	if *runs {
		rows, err := st.ListUsage(ctx, filter)
		if err != nil {
			return keysError("usage", err)
		}
		fmt.Fprintln(tw, "STARTED\tKEY\tNAME\tRUNTIME\tWORKER\tDURATION\tEXIT\tOUTCOME\tBYTES IN\tBYTES OUT")
		for _, u := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%dms\t%d\t%s\t%d\t%d\n", u.Started.Format("2006-01-02 15:04:05.000"), keyLabel(u.KeyID), names[u.KeyID],
				u.Runtime, u.Worker, u.Duration.Milliseconds(), u.ExitCode, u.Outcome, u.BytesIn, u.BytesOut)
		}
		return 0
	}
	sums, err := st.SummarizeUsage(ctx, filter)
	if err != nil {
		return keysError("usage", err)
	}
	fmt.Fprintln(tw, "KEY\tNAME\tRUNS\tRUN TIME\tBYTES IN\tBYTES OUT\tOUTCOMES")
	for _, s := range sums {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%d\t%s\n", keyLabel(s.KeyID), names[s.KeyID], s.Runs, s.Duration.Round(time.Millisecond), s.BytesIn, s.BytesOut, outcomeText(s.Outcomes))
	}
	return 0
}

func keyLabel(id string) string {
	if id == "" {
		return "-"
	}
	return id
}

func outcomeText(m map[string]int64) string {
	var parts []string
	for _, o := range []string{"success", "nonzero_exit", "timeout", "memory_limit", "cancelled", "error"} {
		if m[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", o, m[o]))
		}
	}
	return strings.Join(parts, " ")
}

// parseSince reads a duration back from now, a date or an RFC 3339 time.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return now.Add(-d), nil
	}
	if t, err := time.ParseInLocation(time.DateOnly, s, time.Local); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want a duration (24h), a date (2025-01-31) or an RFC 3339 time", s)
}
