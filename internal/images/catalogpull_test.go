package images

import (
	"archive/tar"
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// fakeBuiltCatalog puts a built image of the catalog image name in place
// (fakeBuilt) with an executable at the program of each of its runtimes
// and the mount points and identity files, as a real build has.
func fakeBuiltCatalog(t *testing.T, s *Store, name string) {
	t.Helper()
	dir := fakeBuilt(t, s, name, currentHash(t, s, name), time.Now())
	for _, r := range s.cat.Runtimes {
		if r.Image == name {
			program := filepath.Join(dir, "rootfs", r.Command[0])
			if err := os.MkdirAll(filepath.Dir(program), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(program, []byte("#!fake "+r.Name+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// What a build's hooks give every image, as a pull gives it too: the
	// same tree then pushes to the same digest from either store.
	if err := s.ensureMountPoints(filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	if err := s.ensureIdentity(filepath.Join(dir, "rootfs")); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.refreshQuietlyLocked()
	s.mu.Unlock()
}

// storeEntries lists what a store holds of images and runtime files.
func storeEntries(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, dir := range []string{s.imagesDir, s.runtimesDir} {
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if e.Name() != ".lock" {
				out = append(out, filepath.Base(dir)+"/"+e.Name())
			}
		}
	}
	return out
}

// A catalog runtime pushed from a store that built its image carries the
// catalog mark; pulled under a catalog name (the runtime, another runtime
// of the image, or the image) into an empty store it becomes that catalog
// image, which every catalog runtime of it resolves to, with no runtime
// file; build then finds it up to date, and it pushes to the same digest.
// An image without the mark, with another image's, or with another recipe
// hash is refused under a catalog name, naming the field, and leaves
// nothing.
func TestPullCatalogImage(t *testing.T) {
	ctx := context.Background()
	reg := imagestest.NewRegistry(t)
	a := openTestStore(t)
	fakeBuiltCatalog(t, a, "trixie")
	hash := currentHash(t, a, "trixie")
	bashRef, err := a.Push(ctx, "bash", reg.Ref("fleet/bash:1"), false, nil)
	if err != nil {
		t.Fatalf("push bash: %v", err)
	}
	cfg, err := remoteImage(t, bashRef).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Config.Labels[CatalogLabel], `{"image":"trixie","recipe_hash":"`+hash+`"}`; got != want {
		t.Errorf("label %s = %q, want %q", CatalogLabel, got, want)
	}
	imageRef, err := a.Push(ctx, "trixie", reg.Ref("fleet/trixie:1"), false, nil)
	if err != nil {
		t.Fatalf("push the catalog image by its name: %v", err)
	}
	if cfg, err := remoteImage(t, imageRef).ConfigFile(); err != nil || cfg.Config.Labels[RuntimeLabel] != "" || cfg.Config.Labels[CatalogLabel] == "" {
		t.Errorf("image pushed by name: labels %v, %v (want the catalog mark alone)", cfg.Config.Labels, err)
	}

	for _, tc := range []struct{ name, ref string }{{"python3.13", reg.Ref("fleet/bash:1")}, {"trixie", imageRef}} {
		b := openTestStore(t)
		var progress bytes.Buffer
		if err := b.Pull(ctx, tc.ref, RuntimeSpec{Name: tc.name}, ImageSelect{}, &progress); err != nil {
			t.Fatalf("pull %s: %v\n%s", tc.name, err, progress.String())
		}
		want := filepath.Join(b.imagesDir, "trixie-"+shortHash(hash))
		for _, rt := range []string{"python3.13", "bash", "node20"} {
			if res, err := b.Resolve(rt); err != nil || res.ImageDir != want {
				t.Errorf("%s pulled as %s: Resolve(%s) = %s, %v; want %s", tc.ref, tc.name, rt, res.ImageDir, err, want)
			}
		}
		if got := storeEntries(t, b); strings.Join(got, " ") != "images/trixie-"+shortHash(hash) {
			t.Errorf("store holds %v, want the catalog image alone (no runtime file)", got)
		}
		list, err := b.List()
		if err != nil || len(list) != 1 {
			t.Fatalf("List = %+v, %v", list, err)
		}
		if im := list[0]; im.Name != "trixie" || im.RecipeHash != hash || im.Source != SourcePull || im.Ref != tc.ref || !im.FromRecipe || !im.Current || !strings.Contains(strings.Join(im.Runtimes, ","), "bash") {
			t.Errorf("listed as %+v", im)
		}
		progress.Reset()
		if err := b.Build(ctx, []string{"bash"}, false, &progress); err != nil || !strings.Contains(progress.String(), "is up to date (pulled from "+tc.ref+")") {
			t.Errorf("build after the pull: %v\n%s", err, progress.String())
		}
		if again, err := b.Push(ctx, "bash", reg.Ref("fleet/bash:again"), false, nil); err != nil || again != reg.Ref("fleet/bash@")+strings.TrimPrefix(bashRef, reg.Ref("fleet/bash@")) {
			t.Errorf("push from the pulled catalog image: %s, %v; want the digest of %s", again, err, bashRef)
		}
	}

	// Pulled again by digest: nothing fetched. Into a store that built
	// the image: kept.
	b := openTestStore(t)
	if err := b.Pull(ctx, bashRef, RuntimeSpec{Name: "bash"}, ImageSelect{}, nil); err != nil {
		t.Fatal(err)
	}
	downloads := reg.BlobDownloads()
	var progress bytes.Buffer
	if err := b.Pull(ctx, bashRef, RuntimeSpec{Name: "node20"}, ImageSelect{}, &progress); err != nil || reg.BlobDownloads() != downloads || !strings.Contains(progress.String(), "nothing to download") {
		t.Errorf("pull again by digest: %v, %d more blobs\n%s", err, reg.BlobDownloads()-downloads, progress.String())
	}
	progress.Reset()
	if err := a.Pull(ctx, reg.Ref("fleet/bash:1"), RuntimeSpec{Name: "bash"}, ImageSelect{}, &progress); err != nil || !strings.Contains(progress.String(), "(built here): kept") {
		t.Errorf("pull over a built image: %v\n%s", err, progress.String())
	}

	// Under another name, the image is an added runtime's, and pushes
	// again to the same digest: its mark goes with it.
	if err := b.Pull(ctx, bashRef, RuntimeSpec{Name: "mybash"}, ImageSelect{}, nil); err != nil {
		t.Fatal(err)
	}
	if again, err := b.Push(ctx, "mybash", reg.Ref("fleet/bash:mine"), false, nil); err != nil || strings.TrimPrefix(again, reg.Ref("fleet/bash@")) != strings.TrimPrefix(bashRef, reg.Ref("fleet/bash@")) {
		t.Errorf("push of the runtime pulled under another name: %s, %v; want the digest of %s", again, err, bashRef)
	}

	layer := []imagestest.Entry{{Name: "bin/", Type: tar.TypeDir, Mode: 0o755}, {Name: "bin/bash", Type: tar.TypeReg, Mode: 0o755, Body: "#!fake\n"}}
	label := func(v string) v1.Config { return v1.Config{Labels: map[string]string{CatalogLabel: v}} }
	reg.Push("plain:1", imagestest.Image(t, "linux/amd64", v1.Config{}, layer))
	reg.Push("oldrecipe:1", imagestest.Image(t, "linux/amd64", label(`{"image":"trixie","recipe_hash":"abc123abc123abc1"}`), layer))
	reg.Push("badmark:1", imagestest.Image(t, "linux/amd64", label(`{"image":"trixie"}`), layer))
	c := openTestStore(t)
	for _, tc := range []struct {
		name, ref string
		spec      RuntimeSpec
		want      string
	}{
		{"no mark", reg.Ref("plain:1"), RuntimeSpec{Name: "python3.13"}, `name: "python3.13" is a catalog runtime (it runs in trixie); this image was not built from the catalog (it has no label ` + CatalogLabel + `): give it another name`},
		{"no mark, image name", reg.Ref("plain:1"), RuntimeSpec{Name: "trixie"}, `name: "trixie" is a catalog image; this image was not built from the catalog`},
		{"another image", bashRef, RuntimeSpec{Name: "python3.11"}, `name: "python3.11" is a catalog runtime (it runs in bookworm); this image is the catalog image trixie`},
		{"another image by name", bashRef, RuntimeSpec{Name: "bookworm"}, `name: "bookworm" is a catalog image; this image is the catalog image trixie`},
		{"another recipe", reg.Ref("oldrecipe:1"), RuntimeSpec{Name: "bash"}, `this image was built from recipe abc123abc123, this scratchrun's recipe for trixie is ` + shortHash(hash) + `: build it here or pull one pushed by this version`},
		{"a broken mark", reg.Ref("badmark:1"), RuntimeSpec{Name: "bash"}, `recipe_hash "" is not a hex hash`},
		{"flags", bashRef, RuntimeSpec{Name: "bash", Command: []string{"/bin/bash", "{file}"}}, `name: "bash" is a catalog runtime (it runs in trixie): the catalog says how its runtimes run`},
	} {
		err := c.Pull(ctx, tc.ref, tc.spec, ImageSelect{}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, err, tc.want)
		}
		if left := storeEntries(t, c); len(left) != 0 {
			t.Errorf("%s: a refused pull left %v", tc.name, left)
		}
	}
}
