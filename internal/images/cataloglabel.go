package images

import (
	"encoding/json"
	"fmt"
	"strings"
)

// CatalogLabel is the image config label `images push` writes on the
// image of a catalog image (built here from its recipe, or pulled as
// one): which catalog image it is and the recipe hash it was built from
// (catalogMark as JSON). `images pull` of a catalog name stores only an
// image whose mark names that catalog image with the recipe this binary
// has, so that the catalog runtimes run in it as in one built here. A
// label beside RuntimeLabel rather than fields in it: an image of a
// catalog image carries no runtime spec of its own when pushed by image
// name, and the runtime spec means the same whether the tree came from a
// recipe or not.
const CatalogLabel = "io.github.scratchrun.catalog"

// catalogMark is what CatalogLabel says. Fields are in the order they
// encode, so that the image's digest depends on nothing else.
type catalogMark struct {
	Image      string `json:"image"`
	RecipeHash string `json:"recipe_hash"`
}

// encode is the label's value.
func (cm catalogMark) encode() string {
	data, err := json.Marshal(cm)
	if err != nil {
		panic(err) // two strings always marshal
	}
	return string(data)
}

// decodeCatalogMark reads the mark in an image's labels: nil when it has
// none, an error naming the label when it is not one.
func decodeCatalogMark(labels map[string]string) (*catalogMark, error) {
	v, ok := labels[CatalogLabel]
	if !ok {
		return nil, nil
	}
	if len(v) > maxLabelBytes {
		return nil, fmt.Errorf("image label %s: %d bytes, at most %d", CatalogLabel, len(v), maxLabelBytes)
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	var cm catalogMark
	if err := dec.Decode(&cm); err != nil {
		return nil, fmt.Errorf("image label %s is not a catalog mark: %w", CatalogLabel, err)
	}
	if err := ValidateName("image label "+CatalogLabel+": image", cm.Image); err != nil {
		return nil, err
	}
	if cm.RecipeHash == "" || strings.Trim(cm.RecipeHash, "0123456789abcdef") != "" {
		return nil, fmt.Errorf("image label %s: recipe_hash %q is not a hex hash", CatalogLabel, cm.RecipeHash)
	}
	return &cm, nil
}

// catalogMarkOf is the mark an image of the store carries when pushed:
// an image of a recipe (built, or pulled as a catalog image) names its
// own; an image stored by digest passes on the mark it came with, so that
// the same tree pushes to the same digest again; any other has none.
func catalogMarkOf(m *imageMeta) *catalogMark {
	switch {
	case m.fromRecipe():
		return &catalogMark{Image: m.Name, RecipeHash: m.RecipeHash}
	case m.byDigest():
		return m.Config.Catalog
	}
	return nil
}

// checkCatalogMark decides whether an image whose mark is cm may be
// stored as the catalog image recipe of this binary, asked for by name
// (that image or one of its runtimes): only when the mark names that
// image and that recipe hash. The errors name the field the operator
// gave (name).
func checkCatalogMark(cm *catalogMark, name string, recipe imageRecipe) error {
	what := catalogWhat(name, recipe)
	hash := recipeHash(recipe)
	switch {
	case cm == nil:
		return fmt.Errorf("name: %q %s; this image was not built from the catalog (it has no label %s): give it another name", name, what, CatalogLabel)
	case cm.Image != recipe.Name:
		return fmt.Errorf("name: %q %s; this image is the catalog image %s (label %s): give it another name, or pull it as %s", name, what, cm.Image, CatalogLabel, cm.Image)
	case cm.RecipeHash != hash:
		return fmt.Errorf("name: %q %s; this image was built from recipe %s, this scratchrun's recipe for %s is %s: build it here or pull one pushed by this version",
			name, what, shortHash(cm.RecipeHash), recipe.Name, shortHash(hash))
	}
	return nil
}

// catalogWhat says what the catalog name (of recipe, or a runtime in it)
// is, for errors.
func catalogWhat(name string, recipe imageRecipe) string {
	if name == recipe.Name {
		return "is a catalog image"
	}
	return fmt.Sprintf("is a catalog runtime (it runs in %s)", recipe.Name)
}

// byDigest reports whether m is an OCI image stored by its digest
// (oci-<digest12>), which the runtimes the operator added run in.
func (m *imageMeta) byDigest() bool {
	return isOCISource(m.Source) && m.Name == ociImageName
}

// fromRecipe reports whether m is an image of a catalog recipe, which the
// catalog runtimes run in: built here with mmdebstrap, or pulled (or
// imported) as a catalog image, its mark checked (pullCatalog).
func (m *imageMeta) fromRecipe() bool {
	return m.Source == SourceMmdebstrap || (isOCISource(m.Source) && m.Name != ociImageName)
}
