package namespaces

import (
	"errors"
	"os"

	"github.com/scratchrun/scratchrun/internal/sandbox"
	"github.com/scratchrun/scratchrun/internal/sandbox/namespaces/spawner"
)

// A zygote (docs/zygotes.md) is a spawner running inside an initialized
// interpreter: sandboxes made through it run the same init, with the same
// namespaces, maps, cgroups, root and confinement, but their pre-started
// interpreter is a fork of the zygote's instead of a new program.

// zygoteProcess is a running zygote and the stage directory it covers.
type zygoteProcess struct {
	*spawner.Spawner
	stage string
}

// Close stops the zygote (its sandboxes die with it: destroy them first)
// and removes its stage directory once the zygote is gone.
func (z *zygoteProcess) Close() error {
	err := z.Spawner.Close()
	z.Spawner.Wait()
	return errors.Join(err, os.Remove(z.stage))
}

// startZygote starts a zygote for sandboxes on img whose interpreter runs
// argv (warm.Zygote's command line) with env. It needs root: the zygote
// keeps CAP_SETUID and CAP_SETGID of the host's.
func (b *Backend) startZygote(img sandbox.Image, argv, env []string) (*zygoteProcess, error) {
	if b.rootless || b.views == nil {
		return nil, errors.New("a zygote needs an engine running as root")
	}
	object, err := spawner.FindZygoteObject(b.opts.StateDir)
	if err != nil {
		return nil, err
	}
	view, err := b.views.Path(img.RootFS, img.UIDBase)
	if err != nil {
		return nil, err
	}
	stage, err := os.MkdirTemp(b.opts.StateDir, "zygote-")
	if err != nil {
		return nil, err
	}
	z := spawner.Zygote{Launcher: b.spawnerPath, Object: object, Stage: stage, Image: img.RootFS,
		ReadOnly: []string{view}, Dirs: []string{b.mountDir}, Argv: argv, Env: env}
	if b.cgroups != nil {
		z.Writable = b.cgroups.Parents()
	}
	sp, err := spawner.StartZygote(z)
	if err != nil {
		os.Remove(stage)
		return nil, err
	}
	return &zygoteProcess{Spawner: sp, stage: stage}, nil
}
