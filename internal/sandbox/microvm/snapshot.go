package microvm

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// A guest that has booted and whose agent waits for its boot message is
// the same for every sandbox of one machine shape (image, RAM, vCPUs):
// nothing of a call has reached it yet. The first such guest of a shape is
// saved (QEMU's migration stream, written to a file) and then carries on;
// later sandboxes of the shape restore it instead of booting, and get
// their own clock and a fresh random seed in the boot message (the agent
// credits the seed and reseeds the kernel's generator before anything
// reads it), so no two calls share random state. Egress guests always
// boot: their network device is not in the saved shape.

// snapshots keeps one saved guest per machine shape, in the cache
// directory (they are the guests' touched RAM, too large for /run), named
// after the engine, which removes them at Close; a crashed engine's are
// removed by the next one.
type snapshots struct {
	dir      string
	instance string
	mu       sync.Mutex
	ready    map[string]string // shape -> file
	saving   map[string]bool
}

// shape is the key of a machine's saved state: everything on QEMU's
// command line that the state depends on.
func shape(spec MachineSpec) string {
	h := sha256.New()
	fmt.Fprintln(h, spec.Accel, spec.Kernel, spec.Initrd, spec.Cmdline, spec.MemoryMB, spec.CPUs, spec.Drive, len(spec.Ports))
	return hex.EncodeToString(h.Sum(nil))[:20]
}

// restore returns the saved state of spec's shape, opened, or nil.
func (s *snapshots) restore(spec MachineSpec) *os.File {
	s.mu.Lock()
	path := s.ready[shape(spec)]
	s.mu.Unlock()
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	return f
}

// claim reports whether the caller should save a guest of spec's shape
// (none is saved or being saved); it must then call saved.
func (s *snapshots) claim(spec MachineSpec) (string, bool) {
	key := shape(spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready[key] != "" || s.saving[key] {
		return "", false
	}
	if s.saving == nil {
		s.saving, s.ready = map[string]bool{}, map[string]string{}
	}
	s.saving[key] = true
	return filepath.Join(s.dir, s.instance+"-"+key+".vmstate"), true
}

// saved ends a claim: path holds the shape's state when ok.
func (s *snapshots) saved(spec MachineSpec, path string, ok bool) {
	key := shape(spec)
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.saving, key)
	if ok {
		s.ready[key] = path
	} else {
		os.Remove(path)
	}
}

// save writes vm's state to path (the caller has claimed it).
func save(vm VM, path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = vm.Save(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// removeAll removes this engine's saved states.
func (s *snapshots) removeAll() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	files, _ := filepath.Glob(filepath.Join(s.dir, s.instance+"-*.vmstate"))
	var err error
	for _, f := range files {
		if rerr := os.Remove(f); rerr != nil && err == nil {
			err = rerr
		}
	}
	s.ready = map[string]string{}
	return err
}

// sweepSnapshots removes the saved states of engines no longer running.
func sweepSnapshots(dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.vmstate"))
	for _, f := range files {
		name := filepath.Base(f)
		instance, _, ok := strings.Cut(name, "-")
		if ok && !hostside.InstanceAlive(instance) {
			os.Remove(f)
		}
	}
}
