// A session sandbox's init: after the setup, it runs the engine's requests
// one after another (initproto.Request): jobs, each under a keeper whose
// process tree alone a timeout or a cancel kills, and file reads and
// writes between them, until end of file on the control pipe ends the
// session.
#ifndef SCRATCHRUN_SESSION_H
#define SCRATCHRUN_SESSION_H

#include <stddef.h>
#include <sys/types.h>

#include "util.h"

#include "wire.h"

void run_session(const struct setup *s) __attribute__((noreturn));
int safe_write(int root, const char *path, const char *data, size_t len);

// keeper_report is what a keeper tells init: that the program could not
// start (started 0, error), or how it ended (started 1, status). A
// kernel's keeper (kernel.c) first reports its start (started 1, pid) and
// then, likewise, the kernel's end.
struct keeper_report {
	int started;
	int status;
	int pid;
	char error[sizeof err_text];
};

// Shared with the resident kernels (kernel.c).
void end_session(void) __attribute__((noreturn));
int descendants(int proc, pid_t keeper, int sig);
int read_report(int fd, struct keeper_report *rep);
int separate(int proc, pid_t keeper, int report, struct keeper_report *rep, int *reported);

#endif
