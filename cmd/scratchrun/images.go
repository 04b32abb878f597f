//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/scratchrun/scratchrun/internal/images"
)

// imagesCommand is one subcommand of images.
type imagesCommand struct {
	name  string
	alias string // a second name it answers to
	run   func(args []string) int
}

// imagesCommands are the subcommands of images, in the order usage lists
// them; the shell completion offers the same list (completion_test.go).
var imagesCommands = []imagesCommand{
	{name: "build", run: imagesBuild},
	{name: "list", alias: "ls", run: imagesList},
	{name: "pull", run: imagesPull},
	{name: "push", run: imagesPush},
	{name: "import", run: imagesImport},
	{name: "export", run: imagesExport},
	{name: "alias", run: imagesAlias},
	{name: "rm", alias: "remove", run: imagesRemove},
	{name: "prune", run: imagesPrune},
}

func cmdImages(args []string) int {
	names := make([]string, len(imagesCommands))
	for i, c := range imagesCommands {
		names[i] = c.name
	}
	if len(args) == 0 {
		fmt.Fprintf(os.Stderr, "usage: scratchrun images %s ...\n", strings.Join(names, "|"))
		return exitUsage
	}
	for _, c := range imagesCommands {
		if args[0] == c.name || (c.alias != "" && args[0] == c.alias) {
			return c.run(args[1:])
		}
	}
	fmt.Fprintf(os.Stderr, "scratchrun images: unknown subcommand %q (want %s or %s)\n", args[0], strings.Join(names[:len(names)-1], ", "), names[len(names)-1])
	return exitUsage
}

func imagesBuild(args []string) int {
	fs := flag.NewFlagSet("images build", flag.ContinueOnError)
	force := fs.Bool("force", false, "rebuild even when an image for the current recipe exists")
	names, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	store, err := openImageStore()
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
	store, err := openImageStore()
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
		name := im.Name
		switch {
		case im.Ref != "" && im.FromRecipe:
			// A catalog image pulled rather than built: its name, and
			// where it came from.
			name += " (pulled from " + im.Ref + ")"
		case im.Ref != "":
			// OCI images are stored by digest: show where they came from.
			name = im.Ref
			if im.Platform != "" && im.Platform != images.DefaultPlatform {
				name += " (" + im.Platform + ")"
			}
		}
		fmt.Fprintf(tw, "%s\t%.12s\t%s\t%s\t%s\t%s\t%s\n", name, im.RecipeHash, im.Source,
			humanBytes(im.SizeBytes), im.Created.Format("2006-01-02 15:04"), strings.Join(im.Runtimes, ","), status)
	}
	tw.Flush()
	if aliases := store.Aliases(); len(aliases) > 0 {
		names := slices.Sorted(maps.Keys(aliases))
		fmt.Println("\nALIAS\tRUNTIME")
		for _, a := range names {
			fmt.Printf("%s\t%s\n", a, aliases[a])
		}
	}
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
	rf := addRuntimeFlags(fs)
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images import NAME ROOTFS.tar|DOCKER-SAVE.tar|OCI-LAYOUT-DIR [--command 'CMD ... {file}' --file main.ext]")
		return exitUsage
	}
	spec, err := rf.spec(pos[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
		return exitInternal
	}
	kind, err := images.ImportKind(pos[1])
	if err != nil {
		return storeExit("import", err)
	}
	if kind == images.KindRootFS {
		if *rf.tag != "" || *rf.warm != "" || *rf.version != "" || *rf.libraries != "" {
			fmt.Fprintln(os.Stderr, "scratchrun images import: --tag, --warm, --version and --libraries apply to docker save archives and OCI layouts, not to a rootfs tarball")
			return exitUsage
		}
		if err := store.Import(spec.Name, pos[1], spec.Command, spec.File, spec.Env, os.Stderr); err != nil {
			fmt.Fprintf(os.Stderr, "scratchrun images import: %v\n", err)
			return exitUsage
		}
		return 0
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := store.ImportImage(ctx, pos[1], spec, rf.selection(false), os.Stderr); err != nil {
		return storeExit("import", err)
	}
	return 0
}

func imagesPrune(args []string) int {
	fs := flag.NewFlagSet("images prune", flag.ContinueOnError)
	if _, err := parseInterspersed(fs, args); err != nil {
		return flagExit(err)
	}
	store, err := openImageStore()
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
