package imagestest

import (
	"bytes"
	"io"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// Image builds an image of one layer per entry list, for platform
// ("os/arch[/variant]"), with cfg as its config.
func Image(t testing.TB, platform string, cfg v1.Config, layers ...[]Entry) v1.Image {
	t.Helper()
	var ls []v1.Layer
	for _, entries := range layers {
		data := Tar(t, entries)
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
	}
	img, err := mutate.AppendLayers(empty.Image, ls...)
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cf = cf.DeepCopy()
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		t.Fatal(err)
	}
	cf.OS, cf.Architecture, cf.Variant = p.OS, p.Architecture, p.Variant
	cf.Config = cfg
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// Index puts images in an index, each under its config's platform.
func Index(t testing.TB, imgs ...v1.Image) v1.ImageIndex {
	t.Helper()
	var adds []mutate.IndexAddendum
	for _, img := range imgs {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: cf.OS, Architecture: cf.Architecture, Variant: cf.Variant}}})
	}
	return mutate.AppendManifests(empty.Index, adds...)
}
