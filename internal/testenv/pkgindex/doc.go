// Package pkgindex is a package index that tests serve on an address of
// their own (loopback, or the outside namespace of networld): a PEP 503
// simple index for pip and an npm registry, holding packages the test
// builds with Wheel and NpmTarball. Tests of installing packages with
// egress then need nothing from the internet, and what they install is
// known byte for byte.
//
// It serves exactly what pip and npm ask for on an install of one
// version (1.0 for wheels, 1.0.0 for npm): the project page, the file, the
// registry document and the tarball; everything else is a 404.
package pkgindex
