// Package images holds ScratchRun's runtime catalog and the on-disk image
// store behind it.
//
// The catalog is data (catalog.json, embedded): a list of image recipes
// (Debian suite, packages, customize hooks) and a list of runtimes (which
// image, which command line, which file name the code is written to). Adding
// a runtime is adding an entry, not code.
//
// The store keeps one read-only root filesystem per image under
// <root>/images/<name>-<hash12>/rootfs, where hash12 names the recipe (see
// recipeHash), so a changed recipe never reuses a stale tree. Images are
// built with mmdebstrap or imported from a rootfs tarball; both are written
// to a temporary directory and renamed into place only when complete, so a
// killed build never looks installed. Extraction shifts file ownership by a
// UID base so that a sandbox whose user namespace maps 0..65535 onto that
// base sees the image as owned by its own root. It drops every set-id bit
// of files and every world-write bit (see fileMode): the store is readable
// by every host user, and its files belong to the sandboxes' uid.
//
// OCI images (pulled, or imported from an archive or a layout) are bounded
// in the disk they take (PullLimits), and every blob is read to its end and
// checked against its size and digest before the image is stored.
//
// This package must never run user code: it runs mmdebstrap and the fixed
// customize hooks of the catalog at build time, and nothing else. Tarballs
// it extracts are treated as hostile: no entry can write outside the
// rootfs it is extracted into.
package images
