// Command containerimage assembles ScratchRun's container image from a
// root filesystem tarball (the base, made by mmdebstrap) and a directory
// holding the binaries, and writes it as an OCI archive (an OCI image
// layout in a tar file) that `podman load` and `skopeo copy oci-archive:`
// read. It needs no container daemon: go-containerregistry, which the
// image pulls already use, writes the layout. scripts/container-image.sh
// runs it; see docs/server.md ("Container image").
//
//	go run ./internal/tools/containerimage -base ROOTFS.tar -bin DIR -out FILE \
//	    -ref NAME:TAG -version V -revision C -source URL -created RFC3339
//
// The output depends on its inputs only (times are -created, owners root),
// so two builds from one commit and one base are the same image.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	var o options
	var created string
	flag.StringVar(&o.base, "base", "", "root filesystem tarball of the base (mmdebstrap's output)")
	flag.StringVar(&o.binDir, "bin", "", "directory of the binaries to put in "+binDir)
	flag.StringVar(&o.out, "out", "", "OCI archive to write")
	flag.StringVar(&o.ref, "ref", "", "the image's name in the archive (NAME:TAG), which podman load tags it with")
	flag.StringVar(&o.version, "version", "", "org.opencontainers.image.version")
	flag.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision (the commit)")
	flag.StringVar(&o.source, "source", "", "org.opencontainers.image.source")
	flag.StringVar(&created, "created", "", "org.opencontainers.image.created and every file's time (RFC 3339)")
	flag.Parse()
	if o.base == "" || o.binDir == "" || o.out == "" || o.ref == "" || o.version == "" || created == "" || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "usage: containerimage -base ROOTFS.tar -bin DIR -out FILE -ref NAME:TAG -version V [-revision C] [-source URL] -created RFC3339")
		os.Exit(2)
	}
	t, err := time.Parse(time.RFC3339, created)
	if err != nil {
		fmt.Fprintln(os.Stderr, "containerimage: -created:", err)
		os.Exit(2)
	}
	o.created = t.UTC()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "containerimage:", err)
		os.Exit(1)
	}
}
