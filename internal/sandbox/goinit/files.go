package goinit

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/scratchrun/scratchrun/internal/sandbox/initproto"
)

// writeFiles stages input files. It runs in init after pivot_root and before
// any user code, so every path resolves inside the sandbox's own tree, which at
// this point holds only the trusted image.
func writeFiles(files []initproto.JobFile) error {
	for _, f := range files {
		if err := os.MkdirAll(filepath.Dir(f.Path), 0o755); err != nil {
			return fmt.Errorf("files[%q]: create parent directory: %w", f.Path, err)
		}
		if err := os.WriteFile(f.Path, f.Data, 0o644); err != nil {
			return fmt.Errorf("files[%q]: %w", f.Path, err)
		}
	}
	return nil
}
