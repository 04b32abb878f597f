//go:build linux

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/scratchrun/scratchrun/internal/buildinfo"
	"github.com/scratchrun/scratchrun/internal/images"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces"
	"github.com/scratchrun/scratchrun/internal/settings"
)

const setupHelp = `usage: scratchrun setup [--dry-run] [--no-images] [--images-from NAME=REF[,NAME=REF...]]

Readies this machine to run sandboxes, after a package install (no Go and
no checkout needed), in three steps:
  1. makes the state directories: the data directory (images/, runtimes.d/)
     and the backend's state directory;
  2. checks the kernel: starts the isolation level's backend as an engine
     does (user namespaces, a cgroup hierarchy with the memory, pids and
     cpu controllers, the scratchrun-spawn helper; runsc or QEMU for the
     gvisor and microvm levels), says what it cannot enforce, and stops it;
  3. pulls the images of --images-from, as 'scratchrun images pull NAME
     REF' does (a catalog name, trixie or python3.13, takes a catalog image
     pushed by this version as that catalog image), then builds the
     catalog's runtime images still missing, as 'scratchrun images build'
     does (with mmdebstrap; minutes each).
What is already there is said and left alone: a second run changes
nothing. It reads the same SCRATCHRUN_* variables as the engine
(SCRATCHRUN_DATA_DIR, SCRATCHRUN_STATE_DIR, SCRATCHRUN_ISOLATION, ...).
A fleet that shares images through a registry gives --images-from with
the catalog images it pushed (and --no-images if it pulls them later).

flags:
`

// setupOptions are setup's flags.
type setupOptions struct {
	dryRun, noImages bool
	// imagesFrom are pulled before images are built.
	imagesFrom []imageSource
}

var setupCompletion = completion{flags: []flagCompletion{
	flagOf("dry-run", false, "print the steps, change nothing"),
	flagOf("no-images", false, "skip building the images"),
	flagOf("images-from", true, "pull these images first: NAME=REF[,NAME=REF...]"),
}}

func cmdSetup(args []string) int {
	fs := flag.NewFlagSet("setup", flag.ContinueOnError)
	var o setupOptions
	fs.BoolVar(&o.dryRun, "dry-run", false, "print what it would do, and change nothing")
	fs.BoolVar(&o.noImages, "no-images", false, "make the directories and check the kernel, but build no image (they are pulled instead)")
	var from []string
	fs.Func("images-from", "pull these images before building what is still missing, NAME=REF[,NAME=REF...] as for worker --images-from (repeatable)", func(v string) error {
		from = append(from, settings.SplitList(v)...)
		return nil
	})
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), setupHelp)
		fs.PrintDefaults()
		fmt.Fprint(fs.Output(), settings.EnvHelp(settings.Exec))
	}
	if code, ok := parseFlagsOnly(fs, args, setupUsageError); !ok {
		return code
	}
	var err error
	if o.imagesFrom, err = parseImagesFrom(from); err != nil {
		return setupUsageError(err.Error())
	}
	v, err := settings.Environment(os.Getenv, settings.Exec)
	var s engineSetup
	if err == nil {
		s, err = parseEngine(v, settings.Exec)
	}
	if err != nil {
		return setupUsageError(err.Error())
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := runSetup(ctx, os.Stdout, os.Stderr, s, o); err != nil {
		fmt.Fprintf(os.Stderr, "scratchrun setup: %v\n", err)
		return exitInternal
	}
	return 0
}

func setupUsageError(msg string) int {
	fmt.Fprintf(os.Stderr, "scratchrun setup: %s\n", msg)
	return exitUsage
}

// setupRun is one run of setup: its report goes to out, the image
// builds' progress (mmdebstrap's own output) to progress.
type setupRun struct {
	out, progress io.Writer
	setup         engineSetup
	opts          setupOptions
	// changed says a step did something (or, dry, would).
	changed bool
}

// runSetup runs setup's steps in order; the first that fails ends it.
func runSetup(ctx context.Context, out, progress io.Writer, s engineSetup, o setupOptions) error {
	r := &setupRun{out: out, progress: progress, setup: s, opts: o}
	mode := ""
	if o.dryRun {
		mode = " (dry run: nothing is changed)"
	}
	fmt.Fprintf(out, "scratchrun setup %s: readying this machine%s\n", buildinfo.Get().Version, mode)
	steps := []struct {
		name string
		run  func(ctx context.Context) error
	}{
		{"state directories", r.directories},
		{"kernel and cgroups for --isolation " + r.isolation(), r.checkBackend},
		{"runtime images", r.images},
	}
	for i, st := range steps {
		fmt.Fprintf(out, "[%d/%d] %s\n", i+1, len(steps), st.name)
		if err := st.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	switch {
	case o.dryRun:
		fmt.Fprintln(out, "dry run: nothing was changed; run it without --dry-run to do the above")
	case r.changed:
		fmt.Fprintln(out, "done: this machine is ready (scratchrun images list shows the runtimes)")
	default:
		fmt.Fprintln(out, "done: everything was already there, nothing was changed")
	}
	return nil
}

func (r *setupRun) say(format string, args ...any) {
	fmt.Fprintf(r.out, "      "+format+"\n", args...)
}

func (r *setupRun) isolation() string {
	if r.setup.backend.isolation == "" {
		return isolationNamespaces
	}
	return r.setup.backend.isolation
}

// stateDir is the backend's state directory as the backend resolves it.
func (r *setupRun) stateDir() string {
	if d := r.setup.backend.stateDir; d != "" {
		return d
	}
	return namespaces.DefaultStateDir()
}

// directories makes the data directory (as the image store lays it out)
// and the state directory, 0755 as the store and the backend make them:
// a sandbox's root, an unprivileged uid, must reach the images and mount
// points.
func (r *setupRun) directories(context.Context) error {
	data := r.setup.dataDir
	for _, d := range []string{data, filepath.Join(data, "images"), filepath.Join(data, "runtimes.d"), r.stateDir()} {
		if _, err := os.Stat(d); err == nil {
			r.say("%s: already there", d)
			continue
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		r.changed = true
		if r.opts.dryRun {
			r.say("%s: would create", d)
			continue
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		r.say("%s: created", d)
	}
	return nil
}

// checkBackend starts the isolation level's backend as an engine starts
// it, which is where every prerequisite is checked, and stops it.
func (r *setupRun) checkBackend(context.Context) error {
	if r.opts.dryRun {
		r.say("would start the %s backend as the engine does and stop it: %s", r.isolation(), backendNeeds(r.isolation()))
		return nil
	}
	b, err := newBackend(r.setup.backend, newLogger(r.setup.debug))
	if err != nil {
		return err
	}
	defer b.Close()
	if err := unenforcedRefusal(b, os.Geteuid() == 0, r.setup.backend.allowUnenforced); err != nil {
		return err
	}
	for _, l := range b.Limitations() {
		r.say("warning: %s", l)
	}
	r.say("ok: the %s backend starts here (%s)", b.Name(), backendNeeds(r.isolation()))
	return nil
}

// backendNeeds says what a level's backend checks as it starts.
func backendNeeds(isolation string) string {
	common := "user namespaces, a cgroup hierarchy with the memory, pids and cpu controllers"
	switch isolation {
	case isolationGVisor:
		return common + ", runsc (scripts/install-runsc.sh), a probe sandbox"
	case isolationMicroVM:
		return common + ", QEMU and the guest kernel (scripts/install-microvm.sh), a probe guest"
	}
	return common + ", the scratchrun-spawn helper (next to scratchrun, else built with cc)"
}

// images pulls the images of --images-from, then builds the catalog
// images still missing, with Build, the code of `scratchrun images
// build`, which skips what is current.
func (r *setupRun) images(ctx context.Context) error {
	if err := r.pull(ctx); err != nil {
		return err
	}
	if r.opts.noImages {
		r.say("skipped (--no-images): pull them with scratchrun images pull")
		return nil
	}
	if _, err := os.Stat(filepath.Join(r.setup.dataDir, "images")); err != nil && r.opts.dryRun {
		// Opening the store would create it: say what a run builds.
		if len(r.opts.imagesFrom) > 0 {
			r.say("would build every catalog image the pulls do not give with mmdebstrap (%s)", mmdebstrapFound())
		} else {
			r.say("would build every catalog image with mmdebstrap (%s)", mmdebstrapFound())
		}
		r.changed = true
		return nil
	}
	store, err := openStore(r.setup.dataDir)
	if err != nil {
		return err
	}
	missing, present := catalogImages(store)
	for _, img := range present {
		r.say("image %s (%s): already there", img.name, strings.Join(img.runtimes, ", "))
	}
	if len(missing) == 0 {
		return nil
	}
	r.changed = true
	var names []string
	for _, img := range missing {
		verb := "building"
		if r.opts.dryRun {
			verb = "would build"
			if src := r.sourceOf(img); src != "" {
				verb = "would build, unless the pull of " + src + " gives it,"
			}
		}
		r.say("image %s (%s): %s with mmdebstrap", img.name, strings.Join(img.runtimes, ", "), verb)
		names = append(names, img.runtimes[0])
	}
	if r.opts.dryRun {
		r.say("mmdebstrap: %s; each image takes minutes", mmdebstrapFound())
		return nil
	}
	if err := store.Build(ctx, names, false, r.progress); err != nil {
		return err
	}
	r.say("built: %d image(s)", len(missing))
	return nil
}

// pull pulls --images-from's images as `images pull` does, or in a dry
// run says it would.
func (r *setupRun) pull(ctx context.Context) error {
	if len(r.opts.imagesFrom) == 0 {
		return nil
	}
	r.changed = true
	if r.opts.dryRun {
		for _, src := range r.opts.imagesFrom {
			r.say("would pull %s from %s", src.name, src.ref)
		}
		return nil
	}
	store, err := openStore(r.setup.dataDir)
	if err != nil {
		return err
	}
	if err := pullSources(ctx, store, r.opts.imagesFrom, "", r.progress); err != nil {
		return err
	}
	r.say("pulled: %d image(s)", len(r.opts.imagesFrom))
	return nil
}

// sourceOf is the --images-from name that stands for img (the image or
// one of its runtimes), if one does.
func (r *setupRun) sourceOf(img catalogImage) string {
	for _, src := range r.opts.imagesFrom {
		if src.name == img.name || slices.Contains(img.runtimes, src.name) {
			return src.name
		}
	}
	return ""
}

// catalogImage is an image of the catalog and its runtimes.
type catalogImage struct {
	name     string
	runtimes []string
}

// catalogImages sorts the catalog's images into those with a runtime not
// installed (Build makes them) and those whose runtimes all are. A
// runtime added by pull (a digest) or import (its image is its own name)
// is not the catalog's, and not built.
func catalogImages(store *images.Store) (missing, present []catalogImage) {
	installed := map[string]bool{}
	for _, rt := range store.Installed() {
		installed[rt.Name] = true
	}
	byImage := map[string]*catalogImage{}
	var order []string
	incomplete := map[string]bool{}
	for _, rt := range store.Catalog() {
		if rt.Digest != "" || rt.Image == rt.Name {
			continue
		}
		img := byImage[rt.Image]
		if img == nil {
			img = &catalogImage{name: rt.Image}
			byImage[rt.Image] = img
			order = append(order, rt.Image)
		}
		img.runtimes = append(img.runtimes, rt.Name)
		incomplete[rt.Image] = incomplete[rt.Image] || !installed[rt.Name]
	}
	slices.Sort(order)
	for _, name := range order {
		if incomplete[name] {
			missing = append(missing, *byImage[name])
		} else {
			present = append(present, *byImage[name])
		}
	}
	return missing, present
}

func mmdebstrapFound() string {
	if p, err := exec.LookPath("mmdebstrap"); err == nil {
		return "found at " + p
	}
	return "not found: apt-get install mmdebstrap"
}
