// An ordinary user's engine gives its sandboxes a writable copy of the
// image's /root (initproto.SetupMessage.CopyHome).
#ifndef SCRATCHRUN_HOME_H
#define SCRATCHRUN_HOME_H

#include "wire.h"

int copy_home(const struct setup *s, const char *root);

#endif
