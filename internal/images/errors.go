package images

import "github.com/scratchrun/scratchrun/internal/images/layertar"

// ErrUnsafeEntry is wrapped by the error of a build, import or pull whose
// tarball or layer has an entry that would land outside the image's root
// (see layertar.ErrUnsafeEntry, which it is).
var ErrUnsafeEntry = layertar.ErrUnsafeEntry
