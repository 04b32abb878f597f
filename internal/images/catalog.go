package images

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"strings"
)

//go:embed catalog.json
var catalogJSON []byte

// imageRecipe describes how to build one image with mmdebstrap. Everything
// in it feeds the recipe hash, so any change yields a new cache entry.
type imageRecipe struct {
	// Name names the image and its cache directory.
	Name string `json:"name"`
	// Suite is the Debian suite passed to mmdebstrap.
	Suite string `json:"suite"`
	// Packages are installed on top of the minbase variant (with their
	// hard dependencies, never Recommends).
	Packages []string `json:"packages"`
	// Stubs are packages replaced by empty stand-ins before Packages are
	// installed, for hard dependencies that are useless at run time and
	// huge (bookworm's python3-scipy depends on python3-pythran, which
	// drags in g++, boost and python3-dev: ~550 MB).
	Stubs []string `json:"stubs,omitempty"`
	// Customize are mmdebstrap --customize-hook commands, run by sh with
	// $1 set to the root of the built tree (use chroot "$1" ...).
	Customize []string `json:"customize,omitempty"`
}

// catalog is the parsed catalog.json.
type catalog struct {
	Images   []imageRecipe `json:"images"`
	Runtimes []Runtime     `json:"runtimes"`
}

// builtinCatalog parses the embedded catalog. It is checked by tests, so an
// error here means a broken build, but it is still returned, not panicked.
func builtinCatalog() (*catalog, error) {
	return parseCatalog(catalogJSON)
}

// parseCatalog decodes strictly (unknown fields are errors, so typos in the
// data do not silently drop settings) and checks consistency.
func parseCatalog(data []byte) (*catalog, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var c catalog
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("parse catalog: %w", err)
	}
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("catalog: %w", err)
	}
	return &c, nil
}

func (c *catalog) validate() error {
	images := map[string]bool{}
	for i, img := range c.Images {
		if err := img.validate(); err != nil {
			return fmt.Errorf("images[%d]: %w", i, err)
		}
		if images[img.Name] {
			return fmt.Errorf("images[%d]: duplicate image name %q", i, img.Name)
		}
		images[img.Name] = true
	}
	runtimes := map[string]bool{}
	for i, r := range c.Runtimes {
		if err := r.validate(); err != nil {
			return fmt.Errorf("runtimes[%d]: %w", i, err)
		}
		if runtimes[r.Name] {
			return fmt.Errorf("runtimes[%d]: duplicate runtime name %q", i, r.Name)
		}
		if r.Digest != "" {
			return fmt.Errorf("runtimes[%d] (%s): digest: catalog runtimes run in catalog images", i, r.Name)
		}
		if !images[r.Image] {
			return fmt.Errorf("runtimes[%d] (%s): image %q is not in the catalog", i, r.Name, r.Image)
		}
		runtimes[r.Name] = true
	}
	return nil
}

func (img imageRecipe) validate() error {
	if err := ValidateName("name", img.Name); err != nil {
		return err
	}
	if err := ValidateName("suite", img.Suite); err != nil {
		return err
	}
	if len(img.Packages) == 0 {
		return fmt.Errorf("image %s: packages: must not be empty", img.Name)
	}
	for _, list := range [][]string{img.Packages, img.Stubs} {
		for _, p := range list {
			// Package names go into a comma separated --include and
			// into a shell script (stubs): allow Debian's alphabet only.
			if p == "" || strings.Trim(p, "abcdefghijklmnopqrstuvwxyz0123456789+-.") != "" {
				return fmt.Errorf("image %s: package name %q is not a Debian package name", img.Name, p)
			}
		}
	}
	for i, h := range img.Customize {
		if strings.TrimSpace(h) == "" {
			return fmt.Errorf("image %s: customize[%d]: empty hook", img.Name, i)
		}
	}
	return nil
}

func (c *catalog) image(name string) (imageRecipe, bool) {
	for _, img := range c.Images {
		if img.Name == name {
			return img, true
		}
	}
	return imageRecipe{}, false
}

func (c *catalog) runtime(name string) (Runtime, bool) {
	for _, r := range c.Runtimes {
		if r.Name == name {
			return r, true
		}
	}
	return Runtime{}, false
}
