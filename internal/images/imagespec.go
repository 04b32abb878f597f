package images

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// RuntimeLabel is the image config label `images push` writes the runtime
// spec in (imageSpec as JSON), so that `images pull NAME REF` needs no
// flags. A label of the config rather than an annotation of the manifest:
// the config is what every transport keeps (a registry, an OCI layout, a
// `docker save` archive, which has no manifest of its own), it is covered
// by the image's digest (the manifest names the config's), and `docker
// inspect` shows it.
const RuntimeLabel = "io.github.scratchrun.runtime"

// maxLabelBytes bounds the label read from an image: a spec is a few
// hundred bytes, and the image is untrusted.
const maxLabelBytes = 64 << 10

// imageSpec is the runtime spec an image carries: how code runs in it.
// The environment is not here: it is the config's own Env, where every
// other tool looks for it too. Fields are in the order they encode, so a
// spec always encodes to the same bytes (and the image to the same
// digest).
type imageSpec struct {
	Command   []string `json:"command"`
	File      string   `json:"file"`
	Version   string   `json:"version,omitempty"`
	Libraries []string `json:"libraries,omitempty"`
	Warm      string   `json:"warm,omitempty"`
	Preload   []string `json:"preload,omitempty"`
}

// specOfRuntime is what an image pushed from r says of it.
func specOfRuntime(r Runtime) imageSpec {
	return imageSpec{Command: slices.Clone(r.Command), File: r.File, Version: r.Version,
		Libraries: slices.Clone(r.Libraries), Warm: r.Warm, Preload: slices.Clone(r.Preload)}
}

// encode is the label's value.
func (is imageSpec) encode() string {
	data, err := json.Marshal(is)
	if err != nil {
		panic(err) // strings and slices of strings always marshal
	}
	return string(data)
}

// decodeImageSpec reads the spec in an image's labels: nil when it has
// none, an error naming the label when it is not one.
func decodeImageSpec(labels map[string]string) (*imageSpec, error) {
	v, ok := labels[RuntimeLabel]
	if !ok {
		return nil, nil
	}
	if len(v) > maxLabelBytes {
		return nil, fmt.Errorf("image label %s: %d bytes, at most %d", RuntimeLabel, len(v), maxLabelBytes)
	}
	dec := json.NewDecoder(strings.NewReader(v))
	dec.DisallowUnknownFields()
	var is imageSpec
	if err := dec.Decode(&is); err != nil {
		return nil, fmt.Errorf("image label %s is not a runtime spec: %w", RuntimeLabel, err)
	}
	return &is, nil
}

// withImage fills what the operator left unsaid from the image's spec:
// field by field, so that a flag given overrides only its own field.
func (sp RuntimeSpec) withImage(is *imageSpec) RuntimeSpec {
	if is == nil {
		return sp
	}
	if len(sp.Command) == 0 {
		sp.Command = slices.Clone(is.Command)
	}
	if sp.File == "" {
		sp.File = is.File
	}
	if sp.Version == "" {
		sp.Version = is.Version
	}
	if sp.Libraries == nil {
		sp.Libraries = slices.Clone(is.Libraries)
	}
	if sp.Warm == "" {
		sp.Warm = is.Warm
	}
	if sp.Preload == nil {
		sp.Preload = slices.Clone(is.Preload)
	}
	return sp
}

// checkPreload refuses module names the warm sandbox could not be handed
// (they travel comma-separated in one variable).
func checkPreload(mods []string) error {
	for _, m := range mods {
		if m == "" || strings.Trim(m, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.") != "" {
			return fmt.Errorf("preload: %q is not a module name", m)
		}
	}
	return nil
}
