//go:build linux

package main

import (
	"flag"
	"fmt"
	"os"
)

// imagesAlias declares, changes or removes an alias: requests for the alias
// run the runtime it stands for, and their result's note says so.
func imagesAlias(args []string) int {
	fs := flag.NewFlagSet("images alias", flag.ContinueOnError)
	remove := fs.Bool("remove", false, "remove the alias instead")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if !*remove && len(pos) != 2 || *remove && len(pos) != 1 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images alias ALIAS RUNTIME   (e.g. python3.12 python3.13)\n       scratchrun images alias --remove ALIAS")
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images alias: %v\n", err)
		return exitInternal
	}
	if *remove {
		err = store.RemoveAlias(pos[0])
	} else {
		err = store.SetAlias(pos[0], pos[1])
	}
	if err != nil {
		return storeExit("alias", err)
	}
	return 0
}

// imagesRemove removes runtimes the operator added; `images prune` then
// removes images no runtime runs in.
func imagesRemove(args []string) int {
	fs := flag.NewFlagSet("images rm", flag.ContinueOnError)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) == 0 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images rm NAME...   (runtimes added by pull or import; then `images prune`)")
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images rm: %v\n", err)
		return exitInternal
	}
	for _, name := range pos {
		if err := store.RemoveRuntime(name); err != nil {
			return storeExit("rm", err)
		}
	}
	return 0
}
