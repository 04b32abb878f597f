// Small helpers every part of the sandbox init uses: how a failed step is
// recorded for the engine, allocation that cannot fail quietly, whole reads
// and writes, and paths.
#ifndef SCRATCHRUN_UTIL_H
#define SCRATCHRUN_UTIL_H

#include <stddef.h>
#include <sys/types.h>

// err_text holds the error of the last step that failed, as the engine
// reports it (fail writes it).
extern char err_text[1024];

const char *errno_text(int err);
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void *xmalloc(size_t n);
char *xstrdup(const char *s);
int read_full(int fd, void *buf, size_t n);
int write_full(int fd, const void *buf, size_t n);
int do_mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data);
char *join(const char *a, const char *b);
int mkdir_all(const char *path, mode_t mode);

#endif
