package images

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"path/filepath"
)

// aliasesFile holds the aliases an operator declared, in the store's root
// (/var/lib/scratchrun/aliases.json by default): {"aliases": {"python3.12":
// "python3.13"}}. There are none until the operator adds one.
const aliasesFile = "aliases.json"

type aliasesDoc struct {
	Aliases map[string]string `json:"aliases"`
}

// loadAliases reads aliases.json. An alias that a runtime of the same name
// now shadows (an upgrade brought a real python3.12, say) is dropped with a
// warning: the real runtime wins. A broken file counts as no aliases, with
// a warning, so that it never takes the runtimes down.
func (s *Store) loadAliases(imported map[string]Runtime) map[string]string {
	var doc aliasesDoc
	file := filepath.Join(s.root, aliasesFile)
	if err := readJSON(file, &doc); err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			slog.Warn("images: ignoring unreadable aliases file", "file", file, "err", err)
		}
		return map[string]string{}
	}
	out := map[string]string{}
	for alias, target := range doc.Aliases {
		_, catalog := s.cat.runtime(alias)
		_, imp := imported[alias]
		switch {
		case ValidateName("alias", alias) != nil || ValidateName("runtime", target) != nil:
			slog.Warn("images: skipping malformed alias", "file", file, "alias", alias, "runtime", target)
		case catalog || imp:
			slog.Warn("images: skipping alias that a runtime of the same name shadows", "file", file, "alias", alias)
		default:
			out[alias] = target
		}
	}
	return out
}

// Aliases returns the aliases in force, alias -> runtime.
func (s *Store) Aliases() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refreshQuietlyLocked()
	return maps.Clone(s.aliases)
}

// SetAlias makes requests for alias run runtime, which must exist (in the
// catalog or added by the operator) and must not itself be an alias. A
// call that used an alias says so in its note (the engine's). Setting an
// alias again changes its runtime.
func (s *Store) SetAlias(alias, runtime string) error {
	if err := ValidateName("alias", alias); err != nil {
		return err
	}
	if err := ValidateName("runtime", runtime); err != nil {
		return err
	}
	return s.editAliases(func(aliases map[string]string) error {
		if _, ok := s.cat.runtime(alias); ok {
			return fmt.Errorf("alias: %q is a catalog runtime already", alias)
		}
		if _, ok := s.imported[alias]; ok {
			return fmt.Errorf("alias: %q is a runtime already", alias)
		}
		if _, ok := aliases[runtime]; ok {
			return fmt.Errorf("runtime: %q is an alias itself; name the runtime it stands for (%s)", runtime, aliases[runtime])
		}
		_, catalog := s.cat.runtime(runtime)
		_, imp := s.imported[runtime]
		if !catalog && !imp {
			return fmt.Errorf("runtime: no runtime %q in the catalog or among added runtimes", runtime)
		}
		aliases[alias] = runtime
		return nil
	})
}

// RemoveAlias removes an alias; requests for it then fail as for any
// unknown runtime.
func (s *Store) RemoveAlias(alias string) error {
	if err := ValidateName("alias", alias); err != nil {
		return err
	}
	return s.editAliases(func(aliases map[string]string) error {
		if _, ok := aliases[alias]; !ok {
			return fmt.Errorf("alias: no alias %q", alias)
		}
		delete(aliases, alias)
		return nil
	})
}

// editAliases changes aliases.json under the store lock, so that two
// operators' edits never lose one another.
func (s *Store) editAliases(edit func(map[string]string) error) error {
	return s.editFresh(func() error {
		aliases := maps.Clone(s.aliases)
		if err := edit(aliases); err != nil {
			return err
		}
		if err := writeJSONAtomic(filepath.Join(s.root, aliasesFile), aliasesDoc{Aliases: aliases}); err != nil {
			return fmt.Errorf("write %s: %w", aliasesFile, err)
		}
		return s.refreshLocked()
	})
}
