//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// imagesPush puts an installed runtime's image, with its runtime spec,
// or a catalog image, with its catalog mark, into a registry; the reference by digest goes to stdout, for scripts
// and for `images pull` and --images-from elsewhere.
func imagesPush(args []string) int {
	fs := flag.NewFlagSet("images push", flag.ContinueOnError)
	insecure := fs.Bool("insecure", false, "allow plain HTTP to a registry that is not on loopback or a private network")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images push RUNTIME|CATALOG-IMAGE REF [--insecure]\n(a catalog image, or a catalog runtime, pulled elsewhere under its catalog name is that catalog image there)")
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images push: %v\n", err)
		return exitInternal
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ref, err := store.Push(ctx, pos[0], pos[1], *insecure, os.Stderr)
	if err != nil {
		return storeExit("push", err)
	}
	fmt.Println(ref)
	return 0
}

// imagesExport writes what push would push to an OCI layout directory or
// a docker save archive, for machines without a registry (`images import`
// or `images pull` takes either there).
func imagesExport(args []string) int {
	fs := flag.NewFlagSet("images export", flag.ContinueOnError)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images export RUNTIME|CATALOG-IMAGE DIR|FILE.tar")
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images export: %v\n", err)
		return exitInternal
	}
	digest, err := store.Export(pos[0], pos[1], os.Stderr)
	if err != nil {
		return storeExit("export", err)
	}
	fmt.Println(digest)
	return 0
}
