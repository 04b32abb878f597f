package namespaces

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// zygoteStagePrefix starts the name of a zygote's stage directory in the
// state directory: zygote-INSTANCE-RANDOM, the instance that of the engine
// that made it (hostside.InstanceName).
const zygoteStagePrefix = "zygote-"

// sweepZygoteStages removes the stage directories of zygotes whose engine
// is gone (alive says which instances live): an engine killed before its
// zygotes' ends left them behind. A stage holds nothing on the host (the
// zygote's mounts live in its own mount namespace, gone with it), so a
// stage that is not empty is left, and reported.
func sweepZygoteStages(stateDir string, alive func(instance string) bool) (int, error) {
	stages, _ := filepath.Glob(filepath.Join(stateDir, zygoteStagePrefix+"*"))
	n := 0
	var errs []error
	for _, stage := range stages {
		name := strings.TrimPrefix(filepath.Base(stage), zygoteStagePrefix)
		dash := strings.LastIndexByte(name, '-')
		if dash <= 0 || alive(name[:dash]) {
			continue
		}
		if err := os.Remove(stage); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
