// A session's resident kernels: interpreters init keeps running between
// jobs (initproto.ResidentJob), each under a keeper of its own, fed one
// request frame per job on its fd 3 and answering on its fd 4.
#ifndef SCRATCHRUN_KERNEL_H
#define SCRATCHRUN_KERNEL_H

#include "wire.h"

void resident_job(int proc, const struct job *j, struct result *res);
void kernels_close_fds(void);

#endif
