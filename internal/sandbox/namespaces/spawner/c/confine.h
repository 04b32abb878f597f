// What confines a sandbox beyond its namespaces: the kernel's per-user
// limits (initproto.UserNamespaceLimits, KernelRlimits), the capabilities
// user code keeps, and the seccomp program the engine compiled.
#ifndef SCRATCHRUN_CONFINE_H
#define SCRATCHRUN_CONFINE_H

#include "wire.h"

int limit_user_namespace(const char *proc, const struct setup *s);
int set_rlimits(const struct setup *s);
int lock_down(const struct setup *s);

#endif
