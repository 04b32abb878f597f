package images

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

func TestAliases(t *testing.T) {
	s := openTestStore(t)
	// Off by default: an unknown name keeps its error listing what is
	// installed.
	if len(s.Aliases()) != 0 {
		t.Fatalf("aliases by default: %v", s.Aliases())
	}
	fakeBuilt(t, s, "trixie", currentHash(t, s, "trixie"), time.Now())
	_, err := s.Resolve("python3.12")
	var nie *NotInstalledError
	if !errors.As(err, &nie) || !errors.Is(err, ErrUnknownRuntime) || !strings.Contains(err.Error(), "installed runtimes: bash, node20, python3.13") {
		t.Fatalf("unknown runtime: %v", err)
	}

	if err := s.SetAlias("python3.12", "python3.13"); err != nil {
		t.Fatalf("SetAlias: %v", err)
	}
	res, err := s.Resolve("python3.12")
	if err != nil || res.Runtime.Name != "python3.13" || res.Alias != "python3.12" {
		t.Fatalf("Resolve(python3.12) = %+v, %v; want python3.13 through the alias", res, err)
	}
	if res, err := s.Resolve("python3.13"); err != nil || res.Alias != "" {
		t.Errorf("Resolve(python3.13) = alias %q, %v", res.Alias, err)
	}
	// Another process sees it: it is in the data directory.
	other, err := OpenStore(Options{Root: s.Root(), UIDBase: testBase})
	if err != nil {
		t.Fatal(err)
	}
	if got := other.Aliases(); got["python3.12"] != "python3.13" {
		t.Errorf("another store sees %v", got)
	}
	if _, err := os.Stat(filepath.Join(s.Root(), "aliases.json")); err != nil {
		t.Errorf("aliases.json: %v", err)
	}

	// An alias of a runtime whose image is missing says both names.
	if err := s.SetAlias("py311", "python3.11"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Resolve("py311")
	if !errors.Is(err, ErrRuntimeNotInstalled) || !strings.Contains(err.Error(), `"py311" is not installed (an alias of python3.11)`) ||
		!strings.Contains(err.Error(), "scratchrun images build python3.11") {
		t.Errorf("alias of a runtime not built: %v", err)
	}

	for _, c := range []struct{ alias, target, want string }{
		{"python3.13", "python3.11", "alias: \"python3.13\" is a catalog runtime"},
		{"py", "python3.12", "runtime: \"python3.12\" is an alias itself"},
		{"py", "ruby3", "runtime: no runtime \"ruby3\""},
		{"Py", "python3.13", "alias:"},
	} {
		if err := s.SetAlias(c.alias, c.target); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("SetAlias(%s, %s) = %v, want %q", c.alias, c.target, err, c.want)
		}
	}
	if err := s.RemoveAlias("python3.12"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Resolve("python3.12"); !errors.Is(err, ErrUnknownRuntime) {
		t.Errorf("removed alias still resolves: %v", err)
	}
	if err := s.RemoveAlias("python3.12"); err == nil || !strings.HasPrefix(err.Error(), "alias:") {
		t.Errorf("removing it twice: %v", err)
	}
}

// An alias may stand for a runtime the operator added, which then cannot be
// removed under it; a runtime added later under the alias's name is refused
// until the alias goes, and one that appears anyway (from an upgrade's
// catalog) wins over it.
func TestAliasOfAnAddedRuntime(t *testing.T) {
	reg := imagestest.NewRegistry(t)
	reg.Push("py:3.12", imagestest.Image(t, "linux/amd64", v1.Config{}, programLayer))
	s := openTestStore(t)
	if err := s.Pull(context.Background(), reg.Ref("py:3.12"), specNamed("mypy"), ImageSelect{}, nil); err != nil {
		t.Fatal(err)
	}
	if err := s.SetAlias("python3.12", "mypy"); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Resolve("python3.12"); err != nil || res.Runtime.Name != "mypy" {
		t.Fatalf("Resolve = %+v, %v", res, err)
	}
	if err := s.RemoveRuntime("mypy"); err == nil || !strings.Contains(err.Error(), "python3.12") {
		t.Errorf("removing a runtime an alias stands for: %v", err)
	}
	if err := s.Pull(context.Background(), reg.Ref("py:3.12"), specNamed("python3.12"), ImageSelect{}, nil); err == nil ||
		!strings.Contains(err.Error(), "is an alias of mypy") {
		t.Errorf("pulling under an alias's name: %v", err)
	}
	// A runtime of the alias's name (written behind the store's back, as
	// a newer catalog would bring it) shadows the alias.
	rt := Runtime{Name: "python3.12", Image: "x", Digest: s.imported["mypy"].Digest, Command: []string{"/bin/sh", "{file}"}, File: "m"}
	if err := writeJSONAtomic(filepath.Join(s.runtimesDir, "python3.12.json"), rt); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Resolve("python3.12"); err != nil || res.Runtime.Name != "python3.12" || res.Alias != "" {
		t.Errorf("a real runtime does not win over the alias: %+v, %v", res, err)
	}
}
