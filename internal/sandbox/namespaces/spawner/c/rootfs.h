// The sandbox's file system, built by its init: an overlay of the image
// with a RAM-backed writable layer, its own /proc (parts hidden and frozen),
// /tmp, /code and /dev, then pivot_root away from the host's tree.
#ifndef SCRATCHRUN_ROOTFS_H
#define SCRATCHRUN_ROOTFS_H

#include "wire.h"

int build_root(const struct setup *s);

#endif
