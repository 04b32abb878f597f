// Package images holds ScratchRun's runtime catalog and the on-disk image
// store behind it: what runtimes exist, how their images get onto the disk,
// and how a runtime name resolves to a root filesystem.
//
// The catalog is data (catalog.json, embedded): a list of image recipes
// (Debian suite, packages, customize hooks) and a list of runtimes (which
// image, which command line, which file name the code is written to). Adding
// a runtime is adding an entry, not code.
//
// The store, under <root> (/var/lib/scratchrun by default), holds:
//
//   - images/<name>-<hash12>/ with rootfs/ and image.json, one read-only
//     tree per image. A catalog image is named by its recipe (recipeHash),
//     so a changed recipe never reuses a stale tree (built here, or pulled
//     as that catalog image: see below); an imported tarball by
//     the tarball's sha256; an OCI image (oci-<digest12>) by its manifest's
//     digest, shared by every runtime made from it.
//   - runtimes.d/<name>.json, the runtimes an operator added: from a
//     rootfs tarball (Import) or from an OCI image (Pull from a registry,
//     ImportImage from a docker save archive or an OCI layout).
//   - aliases.json, names that resolve to another runtime (SetAlias).
//
// Images get there four ways, each written to a .tmp- directory and
// renamed into place only when complete, under the store's lock file, so a
// killed build never looks installed: Build runs mmdebstrap and the
// catalog's customize hooks; Import extracts a rootfs tarball; Pull and
// ImportImage apply an OCI image's layers, bottom first. Every tar stream,
// a build's own output too, goes through one extractor, package layertar,
// which treats it as hostile (nothing written outside the rootfs, no link
// followed out, no set-id bit kept: see its doc). The store's part is what
// comes around it: OCI images are bounded in the disk they take
// (PullLimits), and every blob is read to its end and checked against its
// size and digest, and every layer against its diff ID, before the image
// is stored; a runtime's program must exist in its image.
//
// Ownership is shifted by a UID base (Options.UIDBase) when the store is
// root's, so that a sandbox whose user namespace maps 0..65535 onto that
// base sees the image as owned by its own root; world-write bits are
// dropped then (host users are all "other" to such an image). No file in
// the store has a set-id bit: the store is readable by every host user, and
// images written before that rule are stripped when their owner opens the
// store (setid.go); an image not known to be stripped is not used.
//
// Images leave the store one way, Push (to a registry) or Export (to an
// OCI layout or a docker save archive): the tree as one layer, ownership
// shifted back, written deterministically (treelayer.go), so that a tree
// pulled back pushes to the same digest; the runtime spec rides in the
// config's RuntimeLabel, and a pull or import fills what the operator did
// not say from it. A bare program name in a runtime's command is looked up
// in the image's PATH inside the tree (resolveProgram). An image of a
// catalog recipe also carries its catalog mark (CatalogLabel: the image and
// recipe hash); Pull or ImportImage under a catalog name (an image, or a
// runtime standing for its image) stores only an image whose mark names
// that image and this binary's recipe, and stores it as that catalog image
// (catalogpull.go), which the catalog runtimes then resolve to as to a
// build of it.
//
// This package must never run user code: it runs mmdebstrap and the fixed
// customize hooks of the catalog at build time, and nothing else.
package images
