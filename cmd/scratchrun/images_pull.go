//go:build linux

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

	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/settings"
)

// runtimeFlags are the flags that describe a runtime an operator adds from
// an image (pull or import).
type runtimeFlags struct {
	command, file, version, libraries, warm, platform, tag *string
	envs                                                   listFlag
	limits                                                 images.PullLimits
}

func addRuntimeFlags(fs *flag.FlagSet) *runtimeFlags {
	f := &runtimeFlags{
		command:   fs.String("command", "", "command line inside the image, with {file} where the code file goes, e.g. 'python3.12 {file}' (a bare program is looked up in the image's PATH; default: the image's own spec, as `images push` writes it)"),
		file:      fs.String("file", "", "name of the code file, e.g. main.py (default: the image's own spec)"),
		version:   fs.String("version", "", "interpreter version shown to callers (optional)"),
		libraries: fs.String("libraries", "", "comma-separated libraries shown to callers (optional)"),
		warm:      fs.String("warm", "", "pre-start the interpreter in warm sandboxes: python, node or none (optional)"),
		platform:  fs.String("platform", images.DefaultPlatform, "platform to pick from a multi-platform image, os/arch[/variant]"),
		tag:       fs.String("tag", "", "image to pick from an archive or layout holding several (repository:tag, or the layout's ref name)"),
	}
	fs.Var(&f.envs, "env", "NAME=value set for this runtime, over the image's own environment (repeatable)")
	// The disk an image may take (images.PullLimits); 0 keeps a default.
	sizeVar := func(p *int64, name, usage string) {
		fs.Func(name, usage, func(v string) (err error) { *p, err = settings.ParseSize(v); return err })
	}
	sizeVar(&f.limits.MaxBytes, "max-size", "largest extracted size of the image, all layers (default 8GiB)")
	fs.Int64Var(&f.limits.MaxRatio, "max-ratio", images.DefaultPullMaxRatio, "largest extracted size of a layer as a multiple of its blob's size")
	sizeVar(&f.limits.MinFree, "min-free", "free space the store's file system keeps while the image is written (default 1GiB)")
	return f
}

func (f *runtimeFlags) spec(name string) (images.RuntimeSpec, error) {
	env, err := parseEnv(f.envs)
	if err != nil {
		return images.RuntimeSpec{}, err
	}
	return images.RuntimeSpec{Name: name, Command: strings.Fields(*f.command), File: *f.file, Env: env,
		Version: *f.version, Libraries: settings.SplitList(*f.libraries), Warm: *f.warm}, nil
}

func (f *runtimeFlags) selection(insecure bool) images.ImageSelect {
	return images.ImageSelect{Platform: *f.platform, Tag: *f.tag, Insecure: insecure, Limits: f.limits}
}

// storeExit maps a store error to an exit status: input the operator can fix
// (names, flags, references, platforms) is a usage error.
func storeExit(what string, err error) int {
	fmt.Fprintf(os.Stderr, "scratchrun images %s: %v\n", what, err)
	msg := err.Error()
	for _, field := range []string{"name:", "command", "file:", "env:", "warm:", "platform:", "tag:", "reference:", "archive:", "alias:", "runtime:"} {
		if strings.HasPrefix(msg, field) {
			return exitUsage
		}
	}
	if errors.Is(err, images.ErrInvalidName) {
		return exitUsage
	}
	return exitInternal
}

func imagesPull(args []string) int {
	fs := flag.NewFlagSet("images pull", flag.ContinueOnError)
	rf := addRuntimeFlags(fs)
	insecure := fs.Bool("insecure", false, "allow plain HTTP to a registry that is not on loopback or a private network")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return flagExit(err)
	}
	if len(pos) != 2 {
		fmt.Fprintln(os.Stderr, "usage: scratchrun images pull NAME REF|OCI-LAYOUT-DIR|DOCKER-SAVE.tar [--command 'CMD ... {file}' --file main.ext] [--env K=V] [--platform os/arch]\n(an image `images push` or `images export` wrote needs no --command or --file; NAME a catalog image or runtime, e.g. trixie or python3.13, takes a catalog image pushed by this version as that catalog image)")
		return exitUsage
	}
	spec, err := rf.spec(pos[0])
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images pull: %v\n", err)
		return exitUsage
	}
	store, err := openImageStore()
	if err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun images pull: %v\n", err)
		return exitInternal
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if isLocalImage(pos[1]) {
		// What `images export` wrote, carried to a machine without a
		// registry: the same store call as `images import`.
		err = store.ImportImage(ctx, pos[1], spec, rf.selection(false), os.Stderr)
	} else {
		err = store.Pull(ctx, pos[1], spec, rf.selection(*insecure), os.Stderr)
	}
	if err != nil {
		return storeExit("pull", err)
	}
	return 0
}

// isLocalImage tells a path (an OCI layout or an archive) from a registry
// reference: a reference never starts with / or ., and one that happens to
// name a file here is taken as that file.
func isLocalImage(arg string) bool {
	if strings.HasPrefix(arg, "/") || strings.HasPrefix(arg, ".") {
		return true
	}
	_, err := os.Stat(arg)
	return err == nil
}
