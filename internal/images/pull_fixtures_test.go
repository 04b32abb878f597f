package images

import (
	"archive/tar"

	"github.com/scratchrun/scratchrun/internal/images/imagestest"
)

// programLayer is the smallest rootfs a runtime can be registered on: an
// executable /bin/sh (never run by these tests) and /etc.
var programLayer = []imagestest.Entry{
	{Name: "bin/", Type: tar.TypeDir, Mode: 0o755},
	{Name: "bin/sh", Type: tar.TypeReg, Mode: 0o755, Body: "#!not really a shell\n"},
	{Name: "etc/", Type: tar.TypeDir, Mode: 0o755},
}

var shSpec = RuntimeSpec{Command: []string{"/bin/sh", "{file}"}, File: "main.sh"}

func specNamed(name string) RuntimeSpec {
	sp := shSpec
	sp.Name = name
	return sp
}
