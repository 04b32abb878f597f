// An ordinary user's engine gives its sandboxes a writable copy of the
// image's /root (initproto.SetupMessage.CopyHome).
#ifndef SCRATCHRUN_HOME_H
#define SCRATCHRUN_HOME_H

#include "wire.h"

int copy_home(const struct setup *s, const char *root);

// copy_home_tree copies the image's home (the open directory src) into the
// open directory dst as copy_home does: directories, regular files and
// links, never following one, at most HOME_COPY_MAX bytes, what cannot be
// read left out. The zygote's launcher builds the zygote's home with it.
void copy_home_tree(int src, int dst);

#endif
