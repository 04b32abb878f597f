package gvisor

import (
	"debug/elf"

	"github.com/scratchrun/scratchrun/internal/sandbox/hostside"
)

// dynamicallyLinked reports whether the program at path needs a dynamic
// loader. Inside gVisor init runs on the image's files, so a dynamically
// linked init (a test binary, or scratchrun itself when scratchrun-init is
// missing) depends on the image's C library.
func dynamicallyLinked(path string) bool {
	f, err := elf.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return true
		}
	}
	return false
}

// installInit copies the init program (see hostside.InitProgram) into dir, where the
// gofer, running as the sandboxes' unprivileged uid, can serve it.
func installInit(dir, configured string) (string, error) {
	return hostside.InstallInitProgram(dir, hostside.InitProgram(configured))
}
