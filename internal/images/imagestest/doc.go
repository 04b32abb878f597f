// Package imagestest builds OCI images from hand-written layers and serves
// them from go-containerregistry's registry on loopback, for the tests of
// image pulls and imports (package images' own and the CLI's), which used
// to carry a copy each.
//
// It imports nothing of package images, so that images' internal tests can
// use it.
package imagestest
