// Helpers of the sandbox init (see util.h).
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

char err_text[1024];

// errno_text is strerror with a lower-case start, as the Go init (and the
// rest of the engine's messages) word it.
const char *errno_text(int err) {
	static char buf[128];
	snprintf(buf, sizeof buf, "%s", strerror(err));
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

// fail records "what: errno text" (errno as it was) and returns -1.
int fail(const char *fmt, ...) {
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err_text, sizeof err_text, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof err_text)
		snprintf(err_text + n, sizeof err_text - n, ": %s", errno_text(err));
	return -1;
}

// xmalloc is malloc that cannot return NULL: init has nothing to fall back
// on, and the engine sees it gone and reports it.
void *xmalloc(size_t n) {
	void *p = malloc(n ? n : 1);
	if (!p)
		_exit(1);
	return p;
}

// xstrdup is strdup that cannot return NULL.
char *xstrdup(const char *s) {
	char *copy = strdup(s);
	if (!copy)
		_exit(1);
	return copy;
}

// read_full reads exactly n bytes (-1 on end of file or error).
int read_full(int fd, void *buf, size_t n) {
	char *p = buf;
	while (n > 0) {
		ssize_t got = read(fd, p, n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0)
			return -1;
		p += got, n -= (size_t)got;
	}
	return 0;
}

// write_full writes all n bytes.
int write_full(int fd, const void *buf, size_t n) {
	const char *p = buf;
	while (n > 0) {
		ssize_t put = write(fd, p, n);
		if (put < 0 && errno == EINTR)
			continue;
		if (put <= 0)
			return -1;
		p += put, n -= (size_t)put;
	}
	return 0;
}

// do_mount is mount(2) that records what failed.
int do_mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data) {
	if (mount(source, target, fstype, flags, data) < 0)
		return fail("mount %s on %s (%s)", source, target, fstype ? fstype : "");
	return 0;
}

// join returns a/b, newly allocated.
char *join(const char *a, const char *b) {
	size_t n = strlen(a) + strlen(b) + 2;
	char *s = xmalloc(n);
	snprintf(s, n, "%s/%s", a, b);
	return s;
}

// mkdir_all creates path and its missing parents (as os.MkdirAll).
int mkdir_all(const char *path, mode_t mode) {
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		errno = ENOTDIR;
		return -1;
	}
	char *copy = xstrdup(path);
	char *slash = strrchr(copy, '/');
	if (slash && slash != copy) {
		*slash = 0;
		if (mkdir_all(copy, mode) < 0) {
			free(copy);
			return -1;
		}
	}
	free(copy);
	if (mkdir(path, mode) < 0 && errno != EEXIST)
		return -1;
	return 0;
}
