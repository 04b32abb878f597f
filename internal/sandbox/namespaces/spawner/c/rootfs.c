// The sandbox's file system (see rootfs.h). Nothing here reaches a host
// path after pivot_root, and no mount propagates back to the host.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "home.h"
#include "rootfs.h"
#include "util.h"

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
// (read-only) the /proc paths the engine sends (initproto.MaskedPaths and
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

// build_root turns init's copy of the host's mount tree into the sandbox's:
// an overlay of the image with a RAM-backed writable layer, its own /proc,
// /tmp, /code and /dev, then pivot_root.
// keep_upper keeps the overlay's upper directory open on INIT_UPPER_FD for
// the engine to copy a session's files from (a fork): after pivot_root no
// path leads to it. Only init holds it (close-on-exec, and closed in every
// keeper); user code cannot reach it through /proc, init being
// non-dumpable.
static int keep_upper(const char *upper) {
	if (fcntl(INIT_UPPER_FD, F_GETFD) >= 0) {
		errno = EBUSY;
		return fail("keep the upper directory: fd %d is taken", INIT_UPPER_FD);
	}
	int fd = open(upper, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return fail("open %s", upper);
	if (fd != INIT_UPPER_FD && dup3(fd, INIT_UPPER_FD, O_CLOEXEC) < 0) {
		close(fd);
		return fail("keep the upper directory on fd %d", INIT_UPPER_FD);
	}
	if (fd != INIT_UPPER_FD)
		close(fd);
	return 0;
}

int build_root(const struct setup *s) {
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
	if (build_dev(dev, s) < 0 || mask_proc(root, s) < 0 || ((s->flags & SETUP_SESSION) && keep_upper(upper) < 0) ||
	    pivot(root) < 0)
		return -1;
	if (s->dns_count > 0)
		return write_resolv_conf(s);
	return 0;
}
