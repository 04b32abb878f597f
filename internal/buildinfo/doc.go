// Package buildinfo says which build of scratchrun this is: its version,
// the commit it was built from, when, and with which Go.
//
// A release sets version, commit and date at link time, by exactly
//
//	-ldflags "-X github.com/scratchrun/scratchrun/internal/buildinfo.version=V
//	          -X github.com/scratchrun/scratchrun/internal/buildinfo.commit=C
//	          -X github.com/scratchrun/scratchrun/internal/buildinfo.date=D"
//
// (scripts/install.sh and the release script pass them; the names are part
// of the build's interface and are not renamed). A plain `go build` from a
// checkout sets none of them, and then Get falls back to what the Go
// toolchain stamps into every binary it builds inside a repository
// (debug.ReadBuildInfo: vcs.revision, vcs.time, vcs.modified, and the
// module version it derives from the tags), so that such a build still
// says its commit. The version is "dev" when neither says one.
//
// The package is a leaf (the standard library only): the command, the
// HTTP front end and the cluster's workers all report the same Get.
package buildinfo
