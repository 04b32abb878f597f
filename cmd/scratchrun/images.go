package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
)

func cmdImages(args []string) int {
	if len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images build|list|import|prune ...")
		return exitUsage
	}
	switch args[0] {
	case "build":
		return imagesBuild(args[1:])
	case "list", "ls":
		return imagesList(args[1:])
	case "import":
		return imagesImport(args[1:])
	case "prune":
		return imagesPrune(args[1:])
	default:
		fmt.Fprintf(os.Stderr, "scratchrun images: unknown subcommand %q (want build, list, import or prune)\n", args[0])
		return exitUsage
	}
}

func imagesBuild(args []string) int {
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	force := fs.Bool("force", false, "rebuild even when an image for the current recipe exists")
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	store, err := openStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images build: %v\n", err)
		return exitInternal
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := store.Build(ctx, names, *force, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images build: %v\n", err)
		return exitInternal
	}
	return 0
}

func imagesList(args []string) int {
	fs := flag.NewFlagSet("images list", flag.ContinueOnError)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	store, err := openStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images list: %v\n", err)
		return exitInternal
	}
	list, err := store.List()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images list: %v\n", err)
		return exitInternal
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tRECIPE\tSOURCE\tSIZE\tCREATED\tRUNTIMES\tSTATUS")
	for _, im := range list {
		status := "current"
		if !im.Current {
			status = "stale (prune removes it)"
		}
		fmt.Fprintf(tw, "%s\t%.12s\t%s\t%s\t%s\t%s\t%s\n", im.Name, im.RecipeHash, im.Source,
			humanBytes(im.SizeBytes), im.Created.Format("2006-01-02 15:04"), strings.Join(im.Runtimes, ","), status)
	}
	tw.Flush()
	missing := []string{}
	installed := map[string]bool{}
	for _, rt := range store.Installed() {
		installed[rt.Name] = true
	}
	for _, rt := range store.Catalog() {
		if !installed[rt.Name] {
			missing = append(missing, rt.Name)
		}
	}
	if len(missing) > 0 {
		fmt.Printf("\nnot installed: %s (run `scratchrun images build`)\n", strings.Join(missing, ", "))
	}
	return 0
}

func imagesImport(args []string) int {
	fs := flag.NewFlagSet("images import", flag.ContinueOnError)
	command := fs.String("command", "", "command line inside the image, with {file} where the code file goes, e.g. '/usr/local/bin/python3.12 {file}'")
	file := fs.String("file", "", "name of the code file, e.g. main.py")
	var envs listFlag
	fs.Var(&envs, "env", "NAME=value set for this runtime (repeatable)")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images import NAME ROOTFS.tar --command 'CMD ... {file}' --file main.ext")
		return exitUsage
	}
	env, err := parseEnv(envs)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
		return exitUsage
	}
	store, err := openStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
		return exitInternal
	}
	if err := store.Import(pos[0], pos[1], strings.Fields(*command), *file, env, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
		return exitUsage
	}
	return 0
}

func imagesPrune(args []string) int {
	fs := flag.NewFlagSet("images prune", flag.ContinueOnError)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	store, err := openStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images prune: %v\n", err)
		return exitInternal
	}
	if err := store.Prune(); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images prune: %v\n", err)
		return exitInternal
	}
	return 0
}

func flagExit(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	return exitUsage
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%d KiB", n>>10)
	}
}
