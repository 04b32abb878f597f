// Package packaging holds what scripts/release.sh packages ScratchRun with:
// nfpm's configuration of the .deb and .rpm (nfpm.yaml), the systemd units
// (systemd/: one machine's serve, a cluster's worker and front end), the
// state directories' tmpfiles.d entry and the maintainer scripts; the
// Claude Desktop extension's manifest template and icon (mcpb/, with the
// npm packages that pack it and the mcp-remote bridge pinned in its
// package.json); and the MCP Registry's server.json, which server-json.sh
// fills in for a release.
//
// It has no Go code of its own. One test (the fast tier) validates the
// rendered server.json against the schema in the registry's Go module. The
// others (the full tier: root, minutes) run the release script for both
// architectures and check what it made: the checksums, the SBOM, the
// packages' contents, server.json, the arm64 binaries' ELF headers, the
// extension (mcpb validate, each OS's binary, its Linux entry point run as
// its manifest says against a real serve, as mcp-remote is); then
// they install the .deb into a throwaway Debian root made
// for the test (never on the host: a purge would remove the host's images),
// verify its units with systemd-analyze, run a call with its binaries, and
// purge it, wanting the root's files as they were before.
package packaging
