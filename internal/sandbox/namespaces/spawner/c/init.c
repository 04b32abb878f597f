// The init of a namespaces sandbox: pid 1 of fresh namespaces. It builds the
// mount tree, waits for the one job, locks itself and the job down
// (capabilities, cgroup namespace, the seccomp program the engine compiled),
// runs the job or hands it to a pre-started interpreter, enforces the
// timeout, reaps everything, collects return files and reports.
//
// Why C, and why inside scratchrun-spawn: init starts once per sandbox, so
// its start is paid by every call. As a Go program it was the largest part
// of a sandbox's CPU cost on our 2-core test machine: the runtime's start,
// its page faults and its threads came to about half of init, and init to a
// fifth of the machine's CPU at full load (perf, see docs/design.md). Run
// straight in the spawner's freshly cloned child it costs no exec, no
// dynamic loading and no runtime. The Go init (package nsinit) remains for
// gVisor sandboxes, which run it inside runsc.
//
// The engine's messages come in the binary form of nsinit/wire.go; the
// readers below refuse anything malformed. Nothing here trusts what user
// code left behind, and nothing reaches a host path after pivot_root.
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "init.h"

#define CONTROL_FD 3
#define STATUS_FD 4
// Must match nsinit.MaxSetupBytes and nsinit.MaxJobBytes.
#define MAX_SETUP (4u << 20)
#define MAX_JOB (1u << 30)

// Setup flag bits (nsinit/wire.go).
#define SETUP_MAPS_GROUPS (1u << 0)
#define SETUP_JOINED_NETWORK (1u << 1)
#define SETUP_LOCK_DOWN_EARLY (1u << 2)
#define SETUP_PRESTART (1u << 3)
#define SETUP_COPY_HOME (1u << 4)
// Result flag bits.
#define RESULT_STARTED (1u << 0)
#define RESULT_TIMED_OUT (1u << 1)

// ---- failing ----

// err_text holds the error of the last step that failed, as the engine
// reports it.
static char err_text[1024];

// errno_text is strerror with a lower-case start, as the Go init (and the
// rest of the engine's messages) word it.
static const char *errno_text(int err) {
	static char buf[128];
	snprintf(buf, sizeof buf, "%s", strerror(err));
	buf[0] = (char)tolower((unsigned char)buf[0]);
	return buf;
}

// fail records "what: errno text" (errno as it was) and returns -1.
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
	int err = errno;
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(err_text, sizeof err_text, fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof err_text)
		snprintf(err_text + n, sizeof err_text - n, ": %s", errno_text(err));
	return -1;
}

static void *xmalloc(size_t n) {
	void *p = malloc(n ? n : 1);
	if (!p)
		_exit(1); // the engine sees init gone and reports it
	return p;
}

// ---- the wire form (nsinit/wire.go) ----

struct reader {
	const unsigned char *p, *end;
	int bad;
};

static const unsigned char *take(struct reader *r, uint64_t n) {
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		return NULL;
	}
	const unsigned char *v = r->p;
	r->p += n;
	return v;
}

static uint32_t get_u32(struct reader *r) {
	const unsigned char *v = take(r, 4);
	uint32_t x = 0;
	if (v)
		memcpy(&x, v, 4);
	return le32toh(x);
}

static uint64_t get_u64(struct reader *r) {
	const unsigned char *v = take(r, 8);
	uint64_t x = 0;
	if (v)
		memcpy(&x, v, 8);
	return le64toh(x);
}

// get_bytes returns a NUL-terminated copy (the NUL not counted in *len).
static char *get_bytes(struct reader *r, size_t *len) {
	uint32_t n = get_u32(r);
	const unsigned char *v = take(r, n);
	char *s = xmalloc((size_t)(v ? n : 0) + 1);
	if (v)
		memcpy(s, v, n);
	s[v ? n : 0] = 0;
	if (len)
		*len = v ? n : 0;
	return s;
}

// get_str is get_bytes for text that becomes a C string: an embedded NUL
// would silently cut it, so it makes the message malformed.
static char *get_str(struct reader *r) {
	size_t n;
	char *s = get_bytes(r, &n);
	if (strlen(s) != n)
		r->bad = 1;
	return s;
}

// MAX_LIST bounds a list (argv, env, paths): far above what the engine
// sends, and it keeps a list of empty strings from costing many times its
// size in memory.
#define MAX_LIST 65536

// get_list returns a NULL-terminated array of strings.
static char **get_list(struct reader *r, uint32_t *count) {
	uint32_t n = get_u32(r);
	// Each entry takes at least its 4-byte length.
	if (n > MAX_LIST || (uint64_t)n * 4 > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		n = 0;
	}
	char **v = xmalloc(((size_t)n + 1) * sizeof *v);
	for (uint32_t i = 0; i < n; i++)
		v[i] = get_str(r);
	v[n] = NULL;
	if (count)
		*count = n;
	return v;
}

struct writer {
	unsigned char *p;
	size_t len, cap;
};

static void put(struct writer *w, const void *data, size_t n) {
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		while (cap < w->len + n)
			cap *= 2;
		unsigned char *p = realloc(w->p, cap);
		if (!p)
			_exit(1);
		w->p = p, w->cap = cap;
	}
	memcpy(w->p + w->len, data, n);
	w->len += n;
}

static void put_u32(struct writer *w, uint32_t v) {
	v = htole32(v);
	put(w, &v, 4);
}

static void put_u64(struct writer *w, uint64_t v) {
	v = htole64(v);
	put(w, &v, 8);
}

static void put_bytes(struct writer *w, const void *data, size_t n) {
	put_u32(w, (uint32_t)n);
	put(w, data, n);
}

static void put_str(struct writer *w, const char *s) { put_bytes(w, s, strlen(s)); }

static int read_full(int fd, void *buf, size_t n) {
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

static int write_full(int fd, const void *buf, size_t n) {
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

// read_message reads one frame of at most max bytes; NULL on EOF or error.
static unsigned char *read_message(uint32_t max, struct reader *r) {
	uint32_t n;
	if (read_full(CONTROL_FD, &n, 4) < 0)
		return NULL;
	n = le32toh(n);
	if (n > max)
		return NULL;
	unsigned char *body = xmalloc(n);
	if (read_full(CONTROL_FD, body, n) < 0) {
		free(body);
		return NULL;
	}
	*r = (struct reader){.p = body, .end = body + n};
	return body;
}

static int send_message(struct writer *w) {
	uint32_t n = htole32((uint32_t)w->len);
	if (write_full(STATUS_FD, &n, 4) < 0)
		return -1;
	return write_full(STATUS_FD, w->p, w->len);
}

static void send_ready(const char *error) {
	struct writer w = {0};
	put_u64(&w, error ? 0 : 1);
	put_str(&w, error ? error : "");
	send_message(&w);
	free(w.p);
}

// ---- setup: the sandbox's file system ----

struct setup {
	char *rootfs, *mount_dir, *hostname;
	uint64_t writable_bytes, tmp_bytes, max_inodes, flags, keep_caps;
	char **dns, **mask_paths, **readonly_paths;
	uint32_t dns_count;
	char *seccomp;
	size_t seccomp_len;
	char **prestart_argv, **prestart_env, *prestart_dir;
	uint32_t prestart_argc;
	// /proc/sys/user settings and rlimits (nsinit.KernelLimits)
	char **setting_names;
	uint64_t *setting_values;
	uint32_t setting_count;
	uint64_t *rlimit_resources, *rlimit_values;
	uint32_t rlimit_count;
};

// setting_name_ok accepts a /proc/sys/user file name: lower-case letters
// and underscores only, so it cannot leave that directory.
static int setting_name_ok(const char *name) {
	if (!name[0] || strlen(name) > 64)
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '_'))
			return 0;
	return 1;
}

static int parse_setup(struct reader *r, struct setup *s) {
	s->rootfs = get_str(r);
	s->mount_dir = get_str(r);
	s->writable_bytes = get_u64(r);
	s->tmp_bytes = get_u64(r);
	s->max_inodes = get_u64(r);
	s->hostname = get_str(r);
	s->flags = get_u64(r);
	s->dns = get_list(r, &s->dns_count);
	uint32_t masked, readonly;
	s->mask_paths = get_list(r, &masked);
	s->readonly_paths = get_list(r, &readonly);
	s->seccomp = get_bytes(r, &s->seccomp_len);
	s->keep_caps = get_u64(r);
	s->prestart_argv = get_list(r, &s->prestart_argc);
	s->prestart_env = get_list(r, NULL);
	s->prestart_dir = get_str(r);
	// Each setting takes at least 12 bytes, each rlimit 16.
	s->setting_count = get_u32(r);
	if (s->setting_count > MAX_LIST || (uint64_t)s->setting_count * 12 > (uint64_t)(r->end - r->p))
		return -1;
	s->setting_names = xmalloc(((size_t)s->setting_count + 1) * sizeof(char *));
	s->setting_values = xmalloc(((size_t)s->setting_count + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < s->setting_count; i++) {
		s->setting_names[i] = get_str(r);
		s->setting_values[i] = get_u64(r);
		if (!r->bad && !setting_name_ok(s->setting_names[i]))
			return -1;
	}
	s->rlimit_count = get_u32(r);
	if (s->rlimit_count > MAX_LIST || (uint64_t)s->rlimit_count * 16 > (uint64_t)(r->end - r->p))
		return -1;
	s->rlimit_resources = xmalloc(((size_t)s->rlimit_count + 1) * sizeof(uint64_t));
	s->rlimit_values = xmalloc(((size_t)s->rlimit_count + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < s->rlimit_count; i++) {
		s->rlimit_resources[i] = get_u64(r);
		s->rlimit_values[i] = get_u64(r);
		if (s->rlimit_resources[i] >= RLIM_NLIMITS)
			return -1;
	}
	if (r->bad || r->p != r->end)
		return -1;
	if ((s->flags & SETUP_PRESTART) && s->prestart_argc == 0)
		return -1;
	// An engine that forgot the /proc lists must not get an unmasked /proc.
	if (masked == 0 || readonly == 0)
		return -1;
	return 0;
}

static int do_mount(const char *source, const char *target, const char *fstype, unsigned long flags, const char *data) {
	if (mount(source, target, fstype, flags, data) < 0)
		return fail("mount %s on %s (%s)", source, target, fstype ? fstype : "");
	return 0;
}

static char *join(const char *a, const char *b) {
	size_t n = strlen(a) + strlen(b) + 2;
	char *s = xmalloc(n);
	snprintf(s, n, "%s/%s", a, b);
	return s;
}

// mkdir_all creates path and its missing parents (as os.MkdirAll).
static int mkdir_all(const char *path, mode_t mode) {
	struct stat st;
	if (stat(path, &st) == 0) {
		if (S_ISDIR(st.st_mode))
			return 0;
		errno = ENOTDIR;
		return -1;
	}
	char *copy = strdup(path);
	if (!copy)
		_exit(1);
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

// loopback_up brings up lo in the sandbox's fresh network namespace, where
// it starts down: programs expect localhost to work.
static int loopback_up(void) {
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return fail("socket for lo");
	struct ifreq req;
	memset(&req, 0, sizeof req);
	snprintf(req.ifr_name, sizeof req.ifr_name, "lo");
	int rc = 0;
	if (ioctl(fd, SIOCGIFFLAGS, &req) < 0)
		rc = fail("read lo flags");
	else {
		req.ifr_flags |= IFF_UP;
		if (ioctl(fd, SIOCSIFFLAGS, &req) < 0)
			rc = fail("bring lo up");
	}
	close(fd);
	return rc;
}

// The devices bind-mounted into /dev: the minimal set programs expect, none
// of which reaches hardware or the host's state.
static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};

static int build_dev(const char *dev, const struct setup *s) {
	char opts[256];
	if (mkdir_all(dev, 0755) < 0)
		return fail("create %s", dev);
	if (do_mount("tmpfs", dev, "tmpfs", MS_NOSUID | MS_NOEXEC, "size=64k,nr_inodes=64,mode=0755") < 0)
		return -1;
	for (size_t i = 0; i < sizeof devices / sizeof *devices; i++) {
		char *target = join(dev, devices[i]);
		char host[64];
		snprintf(host, sizeof host, "/dev/%s", devices[i]);
		int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fd < 0)
			return fail("create %s", target);
		close(fd);
		if (do_mount(host, target, NULL, MS_BIND, NULL) < 0)
			return -1;
		free(target);
	}
	static const char *const links[][2] = {
	    {"fd", "/proc/self/fd"}, {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
	    {"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},
	};
	for (size_t i = 0; i < sizeof links / sizeof *links; i++) {
		char *name = join(dev, links[i][0]);
		if (symlink(links[i][1], name) < 0)
			return fail("link /dev/%s", links[i][0]);
		free(name);
	}
	char *pts = join(dev, "pts"), *shm = join(dev, "shm");
	if (mkdir(pts, 0755) < 0)
		return fail("create /dev/pts");
	if (mkdir(shm, 0755) < 0)
		return fail("create /dev/shm");
	snprintf(opts, sizeof opts, "newinstance,ptmxmode=0666,mode=0620%s", (s->flags & SETUP_MAPS_GROUPS) ? ",gid=5" : "");
	if (do_mount("devpts", pts, "devpts", MS_NOSUID | MS_NOEXEC, opts) < 0)
		return -1;
	snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=1777", (unsigned long long)s->tmp_bytes,
	         (unsigned long long)s->max_inodes);
	return do_mount("tmpfs", shm, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, opts);
}

// mask_proc hides (an empty read-only tmpfs, or /dev/null) and freezes
// (read-only) the /proc paths the engine sends (nsinit.MaskedPaths and
// ReadOnlyPaths: they expose host kernel state a sandbox has no need of).
static int mask_proc(const char *root, const struct setup *s) {
	char target[4096];
	for (char **p = s->mask_paths; *p; p++) {
		snprintf(target, sizeof target, "%s%s", root, *p);
		struct stat st;
		if (stat(target, &st) < 0) {
			if (errno == ENOENT)
				continue;
			return fail("stat %s", *p);
		}
		int rc = S_ISDIR(st.st_mode)
		             ? do_mount("tmpfs", target, "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=4k,nr_inodes=4")
		             : do_mount("/dev/null", target, NULL, MS_BIND, NULL);
		if (rc < 0)
			return -1;
	}
	for (char **p = s->readonly_paths; *p; p++) {
		snprintf(target, sizeof target, "%s%s", root, *p);
		struct stat st;
		if (stat(target, &st) < 0 && errno == ENOENT)
			continue;
		if (do_mount(target, target, NULL, MS_BIND | MS_REC, NULL) < 0 ||
		    do_mount("", target, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
			return -1;
	}
	return 0;
}

// pivot makes root the sandbox's "/" and detaches the host's tree entirely:
// pivot_root(".", ".") stacks the old root on the new one, and the lazy
// unmount drops it, leaving no path back to the host.
static int pivot(const char *root) {
	if (chdir(root) < 0)
		return fail("chdir %s", root);
	if (syscall(SYS_pivot_root, ".", ".") < 0)
		return fail("pivot_root %s", root);
	if (umount2(".", MNT_DETACH) < 0)
		return fail("detach the host's root");
	if (chdir("/") < 0)
		return fail("chdir /");
	return 0;
}

// write_resolv_conf points the sandbox at its resolvers (egress only), with
// short timeouts so that a failed lookup fails fast. The image's file may be
// a symlink (into /run on systemd images): it is replaced, not written
// through.
static int write_resolv_conf(const struct setup *s) {
	struct writer w = {0};
	for (uint32_t i = 0; i < s->dns_count; i++) {
		put(&w, "nameserver ", 11);
		put(&w, s->dns[i], strlen(s->dns[i]));
		put(&w, "\n", 1);
	}
	static const char options[] = "options timeout:2 attempts:2\n";
	put(&w, options, sizeof options - 1);
	unlink("/etc/resolv.conf");
	int fd = open("/etc/resolv.conf", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0 || write_full(fd, w.p, w.len) < 0) {
		int rc = fail("write /etc/resolv.conf");
		if (fd >= 0)
			close(fd);
		free(w.p);
		return rc;
	}
	close(fd);
	free(w.p);
	return 0;
}

// ---- an ordinary user's home ----

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
				symlinkat(target, dst, e->d_name);
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

// copy_home makes the sandbox's /root a writable copy of the image's, on
// the writable layer's tmpfs (so it counts against the same size and inode
// caps): for an unprivileged engine, whose sandbox root cannot write the
// image's /root (see nsinit.SetupMessage.CopyHome). Programs keep caches and
// settings in HOME (matplotlib's font cache, baked into the image there, and
// its config directory) and warn or fail without it.
static int copy_home(const struct setup *s, const char *root) {
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
	uint64_t budget = HOME_COPY_MAX;
	if (src >= 0 && dst >= 0)
		copy_tree(src, dst, 0, &budget);
	if (src >= 0)
		close(src);
	if (dst >= 0)
		close(dst);
	int rc = do_mount(home, target, NULL, MS_BIND, NULL);
	free(home), free(image_home), free(target);
	return rc;
}

// limit_user_namespace writes the setup's /proc/sys/user settings under the
// proc mount at proc. They belong to the writer's user namespace (the
// sandbox's, where init holds CAP_SYS_RESOURCE), whichever proc mount
// is used; a file this kernel lacks (older ones have no fanotify limits)
// is skipped.
static int limit_user_namespace(const char *proc, const struct setup *s) {
	char path[4096], value[32];
	for (uint32_t i = 0; i < s->setting_count; i++) {
		snprintf(path, sizeof path, "%s/sys/user/%s", proc, s->setting_names[i]);
		int fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0) {
			if (errno == ENOENT)
				continue;
			return fail("open /proc/sys/user/%s", s->setting_names[i]);
		}
		int n = snprintf(value, sizeof value, "%llu", (unsigned long long)s->setting_values[i]);
		ssize_t w = write(fd, value, (size_t)n);
		int saved = errno;
		close(fd);
		if (w != n) {
			errno = w < 0 ? saved : EIO;
			return fail("write %s to /proc/sys/user/%s", value, s->setting_names[i]);
		}
	}
	return 0;
}

// set_rlimits sets the setup's rlimits, soft and hard, on init (and so on
// everything it starts). A hard limit the engine itself runs under that is
// lower still is kept: raising it would need CAP_SYS_RESOURCE on the host.
static int set_rlimits(const struct setup *s) {
	for (uint32_t i = 0; i < s->rlimit_count; i++) {
		int resource = (int)s->rlimit_resources[i];
		struct rlimit now, want = {.rlim_cur = s->rlimit_values[i], .rlim_max = s->rlimit_values[i]};
		if (getrlimit(resource, &now) < 0)
			return fail("read rlimit %d", resource);
		if (want.rlim_max > now.rlim_max)
			want.rlim_cur = want.rlim_max = now.rlim_max;
		if (setrlimit(resource, &want) < 0)
			return fail("set rlimit %d to %llu", resource, (unsigned long long)want.rlim_max);
	}
	return 0;
}

// build_root turns init's copy of the host's mount tree into the sandbox's:
// an overlay of the image with a RAM-backed writable layer, its own /proc,
// /tmp, /code and /dev, then pivot_root.
static int build_root(const struct setup *s) {
	char opts[8192];
	if (sethostname(s->hostname, strlen(s->hostname)) < 0)
		return fail("set hostname");
	if (!(s->flags & SETUP_JOINED_NETWORK) && loopback_up() < 0)
		return -1;
	// Nothing mounted here may propagate back to the host.
	if (do_mount("", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return -1;
	snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=0755", (unsigned long long)s->writable_bytes,
	         (unsigned long long)s->max_inodes);
	if (do_mount("tmpfs", s->mount_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	char *lower = join(s->mount_dir, "lower"), *upper = join(s->mount_dir, "upper"), *work = join(s->mount_dir, "work"),
	     *root = join(s->mount_dir, "root");
	const char *dirs[] = {lower, upper, work, root};
	for (int i = 0; i < 4; i++)
		if (mkdir(dirs[i], 0755) < 0)
			return fail("create %s", dirs[i]);
	// The overlay's options are shown in the sandbox's mount table as they
	// were given: name the layers relative to the staging directory, with
	// the image bound into it, so that no host path (the data directory,
	// the state directory) appears there. The staging mounts themselves go
	// with the host's tree at pivot_root; the overlay keeps its layers.
	if (do_mount(s->rootfs, lower, NULL, MS_BIND, NULL) < 0)
		return -1;
	if (chdir(s->mount_dir) < 0)
		return fail("chdir %s", s->mount_dir);
	snprintf(opts, sizeof opts, "lowerdir=lower,upperdir=upper,workdir=work");
	if (do_mount("overlay", root, "overlay", MS_NOSUID, opts) < 0) {
		// Inside a user namespace overlayfs keeps its metadata in user.*
		// xattrs; older kernels need to be told.
		int saved = errno;
		char first[sizeof err_text];
		snprintf(first, sizeof first, "%s", err_text);
		strcat(opts, ",userxattr");
		if (mount("overlay", root, "overlay", MS_NOSUID, opts) < 0) {
			snprintf(err_text, sizeof err_text, "%s", first);
			errno = saved;
			return -1;
		}
	}
	char *proc = join(root, "proc"), *tmp = join(root, "tmp"), *code = join(root, "code"), *dev = join(root, "dev");
	if (do_mount("proc", proc, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0 || limit_user_namespace(proc, s) < 0)
		return -1;
	snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=1777", (unsigned long long)s->tmp_bytes,
	         (unsigned long long)s->max_inodes);
	if (do_mount("tmpfs", tmp, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	// The code directory is a small tmpfs of its own: always writable, even
	// for an unprivileged engine whose image files are not the sandbox's.
	if (mkdir_all(code, 0755) < 0)
		return fail("create /code");
	snprintf(opts, sizeof opts, "size=%llu,nr_inodes=%llu,mode=0755", (unsigned long long)s->tmp_bytes,
	         (unsigned long long)s->max_inodes);
	if (do_mount("tmpfs", code, "tmpfs", MS_NOSUID | MS_NODEV, opts) < 0)
		return -1;
	if ((s->flags & SETUP_COPY_HOME) && copy_home(s, root) < 0)
		return -1;
	if (build_dev(dev, s) < 0 || mask_proc(root, s) < 0 || pivot(root) < 0)
		return -1;
	if (s->dns_count > 0)
		return write_resolv_conf(s);
	return 0;
}

// ---- lock-down ----

static int locked_down;

// drop_capabilities cuts the bounding set to keep (a bit per capability:
// Docker's default set, minus CAP_NET_RAW), so that user code, root in its
// user namespace, holds only those after execve; and clears the ambient and
// inheritable sets.
static int drop_capabilities(uint64_t keep) {
	int last = 40;
	int fd = open("/proc/sys/kernel/cap_last_cap", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[16] = {0};
		if (read(fd, buf, sizeof buf - 1) > 0 && atoi(buf) > 0)
			last = atoi(buf);
		close(fd);
	}
	for (int c = 0; c <= last; c++) {
		if (c < 64 && (keep & (1ull << c)))
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0)
			return fail("drop capability %d from the bounding set", c);
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return fail("clear ambient capabilities");
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return fail("read capabilities");
	data[0].inheritable = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return fail("clear inheritable capabilities");
	return 0;
}

// install_seccomp loads the engine's compiled program (struct sock_filter
// as the kernel lays it out, packed by bpfload.Encode) after no_new_privs.
// Init is single-threaded, so no thread needs synchronising.
static int install_seccomp(const struct setup *s) {
	if (s->seccomp_len == 0 || s->seccomp_len % sizeof(struct sock_filter) != 0 ||
	    s->seccomp_len / sizeof(struct sock_filter) > BPF_MAXINSNS) {
		errno = EINVAL;
		return fail("install seccomp filter: a program of %zu bytes", s->seccomp_len);
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return fail("install seccomp filter: set no_new_privs");
	// get_bytes copied it into malloc'ed memory: aligned for sock_filter.
	struct sock_fprog prog = {
	    .len = (unsigned short)(s->seccomp_len / sizeof(struct sock_filter)),
	    .filter = (struct sock_filter *)s->seccomp,
	};
	if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
		return fail("install seccomp filter");
	return 0;
}

// lock_down is the last step before user code: a cgroup namespace rooted at
// the sandbox's cgroup, the capability cuts, init made unreadable to
// ptrace, and the seccomp filter. It runs exactly once.
static int lock_down(const struct setup *s) {
	if (unshare(CLONE_NEWCGROUP) < 0)
		return fail("unshare cgroup namespace");
	if (drop_capabilities(s->keep_caps) < 0)
		return -1;
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
		return fail("set init non-dumpable");
	if (install_seccomp(s) < 0)
		return -1;
	locked_down = 1;
	return 0;
}

// ---- processes ----

// start_process starts argv (an absolute path, not looked up) in dir with
// env, stdin /dev/null, init's stdout and stderr, and fd3 (if not -1) as
// its fd 3. It returns the pid, or -1 with err_text set, once the program
// has been executed: an exec failure is reported here, as Go's ForkExec
// reports it, not as an exit status.
static pid_t start_process(char **argv, char **env, const char *dir, int fd3) {
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0)
		return fail("start %s: pipe", argv[0]);
	pid_t pid = fork();
	if (pid < 0) {
		fail("start %s", argv[0]);
		close(report[0]);
		close(report[1]);
		return -1;
	}
	if (pid == 0) {
		// Signals as a fresh program expects them: none blocked, none ignored.
		sigset_t none;
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		for (int s = 1; s < NSIG; s++)
			signal(s, SIG_DFL);
		int err = 0;
		int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (devnull < 0 || dup2(devnull, 0) < 0)
			err = errno;
		else if (fd3 >= 0 && fd3 != 3 && dup2(fd3, 3) < 0)
			err = errno;
		else if (fd3 == 3 && fcntl(3, F_SETFD, 0) < 0)
			err = errno;
		else if (dir[0] && chdir(dir) < 0)
			err = errno;
		else {
			execve(argv[0], argv, env);
			err = errno;
		}
		(void)!write(report[1], &err, sizeof err);
		_exit(127);
	}
	close(report[1]);
	int err = 0;
	ssize_t got;
	do
		got = read(report[0], &err, sizeof err);
	while (got < 0 && errno == EINTR);
	close(report[0]);
	if (got == sizeof err) {
		waitpid(pid, NULL, 0);
		errno = err;
		return fail("start %s", argv[0]);
	}
	return pid;
}

struct prestarted {
	pid_t pid;
	int control; // write end of the interpreter's fd 3
};

// prestart starts the setup's interpreter with a pipe on its fd 3; it
// returns pid 0 when it could not (the job then starts cold).
static struct prestarted prestart(const struct setup *s) {
	struct prestarted p = {0, -1};
	int pipe_fds[2];
	if (pipe2(pipe_fds, O_CLOEXEC) < 0)
		return p;
	pid_t pid = start_process(s->prestart_argv, s->prestart_env, s->prestart_dir, pipe_fds[0]);
	close(pipe_fds[0]);
	if (pid < 0) {
		close(pipe_fds[1]);
		return p;
	}
	p.pid = pid, p.control = pipe_fds[1];
	return p;
}

// ---- the job ----

struct job {
	char **argv, **env, *dir;
	uint32_t argc, file_count, return_count;
	char **file_paths, **file_data;
	size_t *file_lens;
	char **return_files;
	uint64_t max_return_bytes, timeout_ns;
};

static int parse_job(struct reader *r, struct job *j) {
	j->argv = get_list(r, &j->argc);
	j->env = get_list(r, NULL);
	j->dir = get_str(r);
	uint32_t n = get_u32(r);
	if ((uint64_t)n * 8 > (uint64_t)(r->end - r->p))
		return -1;
	j->file_count = n;
	j->file_paths = xmalloc(((size_t)n + 1) * sizeof(char *));
	j->file_data = xmalloc(((size_t)n + 1) * sizeof(char *));
	j->file_lens = xmalloc(((size_t)n + 1) * sizeof(size_t));
	for (uint32_t i = 0; i < n; i++) {
		j->file_paths[i] = get_str(r);
		j->file_data[i] = get_bytes(r, &j->file_lens[i]);
	}
	j->return_files = get_list(r, &j->return_count);
	j->max_return_bytes = get_u64(r);
	j->timeout_ns = get_u64(r);
	// Go sends these as int64: above INT64_MAX they were negative there.
	if (r->bad || r->p != r->end || j->argc == 0 || j->max_return_bytes > INT64_MAX || j->timeout_ns > INT64_MAX)
		return -1;
	return 0;
}

// write_files stages the input files. It runs after pivot_root and before
// any user code, so every path resolves in the sandbox's own tree, which
// holds only the trusted image yet.
static int write_files(const struct job *j) {
	for (uint32_t i = 0; i < j->file_count; i++) {
		const char *path = j->file_paths[i];
		char *parent = strdup(path);
		if (!parent)
			_exit(1);
		char *slash = strrchr(parent, '/');
		if (slash && slash != parent) {
			*slash = 0;
			if (mkdir_all(parent, 0755) < 0)
				return fail("files[\"%s\"]: create parent directory", path);
		}
		free(parent);
		int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write_full(fd, j->file_data[i], j->file_lens[i]) < 0) {
			int rc = fail("files[\"%s\"]", path);
			if (fd >= 0)
				close(fd);
			return rc;
		}
		close(fd);
		free(j->file_data[i]);
		j->file_data[i] = NULL;
	}
	return 0;
}

// deliver hands the job to the pre-started interpreter (its path, directory
// and environment as NUL-ended fields: sandbox.PrestartJob) and returns its
// pid, or 0 when the job must start cold (nothing of it has run).
static pid_t deliver(struct prestarted *p, const struct job *j) {
	if (p->pid <= 0)
		return 0;
	int status;
	if (waitpid(p->pid, &status, WNOHANG) != 0) {
		close(p->control);
		return 0; // died before the job arrived
	}
	struct writer w = {0};
	put(&w, j->dir, strlen(j->dir) + 1);
	put(&w, j->argv[j->argc - 1], strlen(j->argv[j->argc - 1]) + 1);
	for (char **e = j->env; *e; e++)
		put(&w, *e, strlen(*e) + 1);
	int rc = write_full(p->control, w.p, w.len);
	free(w.p);
	close(p->control);
	if (rc < 0) {
		kill(p->pid, SIGKILL);
		waitpid(p->pid, NULL, 0);
		return 0;
	}
	return p->pid;
}

static uint64_t now_ns(void) {
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

// reap_until reaps children (orphans reparent to init, pid 1) until pid
// exits or the deadline passes; it returns 1 with pid's status, 0 at the
// deadline, or -1 if no child is left at all (pid was lost). SIGCHLD is
// blocked, so sigtimedwait sleeps until one arrives. The deadline is checked
// after every reap: a program that makes orphans exit in a steady stream
// must not postpone its own timeout.
static int reap_until(pid_t pid, uint64_t deadline, int *status) {
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		int st;
		pid_t got;
		while ((got = waitpid(-1, &st, WNOHANG)) > 0) {
			if (got == pid) {
				*status = st;
				return 1;
			}
			if (now_ns() >= deadline)
				return 0;
		}
		if (got < 0 && errno == ECHILD)
			return -1;
		uint64_t now = now_ns();
		if (now >= deadline)
			return 0;
		uint64_t left = deadline - now;
		struct timespec wait = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
		sigtimedwait(&chld, NULL, &wait);
	}
}

static void reap_all(void) {
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
	}
}

// read_in_root reads one return file. The path resolves with
// RESOLVE_IN_ROOT against the sandbox's root, so a symlink (absolute or full
// of "..") cannot leave the sandbox's tree, and RESOLVE_NO_MAGICLINKS
// refuses /proc/<pid>/fd and /proc/<pid>/root jumps. Only regular files
// outside /proc and /sys qualify; one larger than what is left of the
// budget is skipped whole (a cut binary file is worse than none).
static char *read_in_root(int root, const char *path, uint64_t budget, size_t *len, char *why, size_t why_size) {
	struct open_how how = {
	    .flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	int fd = (int)syscall(SYS_openat2, root, path, &how, sizeof how);
	if (fd < 0) {
		snprintf(why, why_size, "%s", errno == ENOENT ? "it does not exist" : errno_text(errno));
		return NULL;
	}
	struct stat st;
	struct statfs fs;
	char *data = NULL;
	if (fstat(fd, &st) < 0 || fstatfs(fd, &fs) < 0) {
		snprintf(why, why_size, "%s", errno_text(errno));
	} else if (!S_ISREG(st.st_mode)) {
		snprintf(why, why_size, "it is not a regular file");
	} else if (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC) {
		snprintf(why, why_size, "it is a kernel pseudo-file");
	} else if ((uint64_t)st.st_size > budget) {
		snprintf(why, why_size, "it is %lld bytes, more than the %llu bytes left for return files",
		         (long long)st.st_size, (unsigned long long)budget);
	} else {
		// Read at most budget+1 bytes: a file that grew past the budget
		// since fstat is refused, not cut.
		size_t cap = (size_t)st.st_size + 1, n = 0;
		data = xmalloc(cap);
		for (;;) {
			if (n == cap) {
				if (cap > budget) // n > budget
					break;
				cap = cap * 2 > budget + 1 ? (size_t)budget + 1 : cap * 2;
				char *grown = realloc(data, cap);
				if (!grown)
					_exit(1);
				data = grown;
			}
			ssize_t got = read(fd, data + n, cap - n);
			if (got < 0 && errno == EINTR)
				continue;
			if (got < 0) {
				snprintf(why, why_size, "%s", errno_text(errno));
				free(data);
				data = NULL;
				break;
			}
			if (got == 0)
				break;
			n += (size_t)got;
		}
		if (data && n > budget) {
			snprintf(why, why_size, "it grew past the %llu bytes left for return files", (unsigned long long)budget);
			free(data);
			data = NULL;
		}
		*len = n;
	}
	close(fd);
	return data;
}

// run_job runs the job and sends its result; see serveProtocol's runJob in
// nsinit for the Go init's twin.
static void run_job(const struct setup *s, struct job *j, struct prestarted *warm) {
	struct writer w = {0};
	uint64_t flags = 0, duration = 0;
	int64_t exit_code = 0, signal_number = 0;
	struct writer files = {0}, notes = {0};
	uint32_t file_count = 0, note_count = 0;
	const char *error = "";

	if (write_files(j) < 0 || (!locked_down && lock_down(s) < 0)) {
		error = err_text;
		goto send;
	}
	uint64_t start = now_ns();
	pid_t pid = deliver(warm, j);
	if (pid == 0)
		pid = start_process(j->argv, j->env, j->dir, -1);
	if (pid < 0) {
		error = err_text;
		goto send;
	}
	flags |= RESULT_STARTED;
	uint64_t deadline = start + j->timeout_ns;
	if (deadline < start)
		deadline = UINT64_MAX;
	int status = 0;
	int reaped = reap_until(pid, deadline, &status);
	if (reaped == 0) {
		flags |= RESULT_TIMED_OUT;
		kill(-1, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
		}
	} else if (reaped < 0) {
		error = "init lost track of the program";
		goto send;
	}
	duration = now_ns() - start;
	// Whatever the program left behind (daemons, stray children) dies now,
	// before return files are read, so nothing can change them under us.
	kill(-1, SIGKILL);
	reap_all();
	if (WIFSIGNALED(status)) {
		signal_number = WTERMSIG(status);
		exit_code = 128 + signal_number;
	} else {
		exit_code = WEXITSTATUS(status);
	}

	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	int root_errno = errno;
	uint64_t budget = j->max_return_bytes;
	for (uint32_t i = 0; i < j->return_count; i++) {
		char why[256] = "", note[8192];
		size_t len = 0;
		char *data = NULL;
		if (root < 0)
			snprintf(why, sizeof why, "%s", errno_text(root_errno));
		else
			data = read_in_root(root, j->return_files[i], budget, &len, why, sizeof why);
		if (!data) {
			snprintf(note, sizeof note, "Return file %s was not returned: %s.", j->return_files[i], why);
			put_str(&notes, note);
			note_count++;
			continue;
		}
		budget -= len;
		put_str(&files, j->return_files[i]);
		put_bytes(&files, data, len);
		file_count++;
		free(data);
	}
	if (root >= 0)
		close(root);

send:
	put_u64(&w, flags);
	put_u64(&w, (uint64_t)exit_code);
	put_u64(&w, (uint64_t)signal_number);
	put_u64(&w, duration);
	put_u32(&w, file_count);
	if (files.len)
		put(&w, files.p, files.len);
	put_u32(&w, note_count);
	if (notes.len)
		put(&w, notes.p, notes.len);
	put_str(&w, error);
	send_message(&w);
}

void sandbox_init(void) {
	// The engine's pipes must not reach user code.
	fcntl(CONTROL_FD, F_SETFD, FD_CLOEXEC);
	fcntl(STATUS_FD, F_SETFD, FD_CLOEXEC);
	// A gone engine makes writes fail, not kill init.
	signal(SIGPIPE, SIG_IGN);
	// Children's exits are waited for with sigtimedwait (reap_until).
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);

	struct reader r;
	struct setup s;
	memset(&s, 0, sizeof s);
	unsigned char *setup_body = read_message(MAX_SETUP, &r);
	if (!setup_body)
		_exit(1);
	int setup_parsed = parse_setup(&r, &s);
	free(setup_body);
	if (setup_parsed < 0) {
		send_ready("malformed setup message");
		_exit(1);
	}
	if (build_root(&s) < 0 || set_rlimits(&s) < 0 ||
	    (((s.flags & SETUP_PRESTART) || (s.flags & SETUP_LOCK_DOWN_EARLY)) && lock_down(&s) < 0)) {
		send_ready(err_text);
		_exit(1);
	}
	struct prestarted warm = {0, -1};
	if (s.flags & SETUP_PRESTART)
		warm = prestart(&s); // a failed pre-start is not fatal: the job starts cold
	send_ready(NULL);

	struct job j;
	memset(&j, 0, sizeof j);
	unsigned char *body = read_message(MAX_JOB, &r);
	if (!body)
		_exit(0); // the engine went away or destroyed us unused
	close(CONTROL_FD);
	int parsed = parse_job(&r, &j);
	free(body); // the job's fields are copies: input files stay in memory once
	if (parsed < 0) {
		struct writer w = {0};
		put_u64(&w, 0), put_u64(&w, 0), put_u64(&w, 0), put_u64(&w, 0);
		put_u32(&w, 0), put_u32(&w, 0);
		put_str(&w, "malformed job message");
		send_message(&w);
		_exit(1);
	}
	run_job(&s, &j, &warm);
	_exit(0);
}
