// The sandbox's home for an ordinary user's engine (see home.h).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "home.h"
#include "util.h"

// HOME_COPY_MAX bounds what copy_tree copies: images keep little in /root
// (shell profiles, matplotlib's font cache), and an imported image with a
// huge /root must not fill the writable layer before the job starts.
#define HOME_COPY_MAX (16u << 20)

static int copy_file(int src_dir, int dst_dir, const char *name, mode_t mode, uint64_t *budget) {
	int in = openat(src_dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (in < 0)
		return -1;
	int out = openat(dst_dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
	if (out < 0) {
		close(in);
		return -1;
	}
	char buf[16384];
	ssize_t n;
	while ((n = read(in, buf, sizeof buf)) > 0 && (uint64_t)n <= *budget) {
		*budget -= (uint64_t)n;
		if (write_full(out, buf, (size_t)n) < 0)
			break;
	}
	close(in);
	close(out);
	return 0;
}

// copy_tree copies directory src's entries into directory dst (both open
// descriptors): directories, regular files and symbolic links, never
// following a link, each owned by the sandbox's root with its owner
// granted write. What cannot be read is left out: the copy keeps the caches
// images bake into /root, it is not a promise.
static void copy_tree(int src, int dst, int depth, uint64_t *budget) {
	int fd = dup(src);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct dirent *e;
	while ((e = readdir(d)) && *budget > 0) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		struct stat st;
		if (fstatat(src, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
			continue;
		if (S_ISREG(st.st_mode)) {
			copy_file(src, dst, e->d_name, (st.st_mode & 0777) | 0600, budget);
		} else if (S_ISLNK(st.st_mode)) {
			char target[4096];
			ssize_t n = readlinkat(src, e->d_name, target, sizeof target - 1);
			if (n > 0) {
				target[n] = 0;
				(void)!symlinkat(target, dst, e->d_name); // left out if it fails
			}
		} else if (S_ISDIR(st.st_mode) && depth < 8 && mkdirat(dst, e->d_name, (st.st_mode & 0777) | 0700) == 0) {
			int from = openat(src, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			int to = openat(dst, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
			if (from >= 0 && to >= 0)
				copy_tree(from, to, depth + 1, budget);
			if (from >= 0)
				close(from);
			if (to >= 0)
				close(to);
		}
	}
	closedir(d);
}

void copy_home_tree(int src, int dst) {
	uint64_t budget = HOME_COPY_MAX;
	copy_tree(src, dst, 0, &budget);
}

// copy_home makes the sandbox's /root a writable copy of the image's, on
// the writable layer's tmpfs (so it counts against the same size and inode
// caps): for an unprivileged engine, whose sandbox root cannot write the
// image's /root (see initproto.SetupMessage.CopyHome). Programs keep caches and
// settings in HOME (matplotlib's font cache, baked into the image there, and
// its config directory) and warn or fail without it.
int copy_home(const struct setup *s, const char *root) {
	char *home = join(s->mount_dir, "home"), *image_home = join(s->rootfs, "root"), *target = join(root, "root");
	struct stat st;
	if (lstat(target, &st) < 0 || !S_ISDIR(st.st_mode)) {
		free(home), free(image_home), free(target);
		return 0; // an imported image without /root: nothing to stand in for
	}
	if (mkdir(home, 0700) < 0)
		return fail("create %s", home);
	int src = open(image_home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	int dst = open(home, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (src >= 0 && dst >= 0)
		copy_home_tree(src, dst);
	if (src >= 0)
		close(src);
	if (dst >= 0)
		close(dst);
	int rc = do_mount(home, target, NULL, MS_BIND, NULL);
	free(home), free(image_home), free(target);
	return rc;
}
