package images

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RemoveRuntime removes a runtime the operator added (pulled or imported);
// its image stays until Prune, which removes images no runtime runs in.
// Catalog runtimes cannot be removed, and a runtime an alias stands for
// must lose its aliases first.
func (s *Store) RemoveRuntime(name string) error {
	if err := ValidateName("name", name); err != nil {
		return err
	}
	if _, ok := s.cat.runtime(name); ok {
		return fmt.Errorf("name: %q is a catalog runtime, which cannot be removed", name)
	}
	return s.editFresh(func() error {
		if _, ok := s.imported[name]; !ok {
			return fmt.Errorf("name: no added runtime %q", name)
		}
		var aliases []string
		for alias, target := range s.aliases {
			if target == name {
				aliases = append(aliases, alias)
			}
		}
		if len(aliases) > 0 {
			slices.Sort(aliases)
			return fmt.Errorf("name: %s is what the aliases %s stand for: remove them first (scratchrun images alias --remove NAME)", name, strings.Join(aliases, ", "))
		}
		if err := os.Remove(filepath.Join(s.runtimesDir, name+".json")); err != nil {
			return fmt.Errorf("remove runtime %s: %w", name, err)
		}
		return s.refreshLocked()
	})
}
