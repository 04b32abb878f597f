// Running the sandbox's one job: staging its files, starting it (or handing
// it to a pre-started interpreter), enforcing its timeout, reaping every
// process, and reading the return files once nothing of it runs.
#ifndef SCRATCHRUN_JOB_H
#define SCRATCHRUN_JOB_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "wire.h"

// prestarted is an interpreter started before the job, waiting on its fd 3.
struct prestarted {
	pid_t pid;
	int control; // write end of the interpreter's fd 3
};

struct prestarted prestart(const struct setup *s);
void run_job(const struct setup *s, struct job *j, struct prestarted *warm);

// Shared with a session's jobs (session.c).
pid_t start_process(char **argv, char **env, const char *dir, int fd3, int fd4);
uint64_t now_ns(void);
void reap_all(void);
char *read_in_root(int root, const char *path, uint64_t budget, size_t *len, char *why, size_t why_size);
void collect_return_files(struct result *res, const struct job *j);

#endif
