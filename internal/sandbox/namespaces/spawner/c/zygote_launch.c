// `scratchrun-spawn --zygote`: the zygote's launcher (see docs/zygotes.md).
// Run as root by the engine with the spawner's socket on fd 3 and the
// zygote's shared object (a memfd) on fd 4, it builds the zygote's world
// and then becomes the image's interpreter:
//
//   scratchrun-spawn --zygote --stage DIR --image ROOTFS [--owners FIRST:COUNT]
//       [--cgroup PROCS]... [--ro PATH]... [--dir PATH]... -- PROGRAM [ARG]...
//
// First of all it joins the cgroups whose cgroup.procs files --cgroup
// names (the engine's group for this zygote): everything it, pid 1 and
// the zygote then allocate is charged there (cgroup v1 charges a page to
// the group it was first touched in, and a move later takes no charge
// along), so the zygote's memory is in the sandboxes' parent, where the
// engine's admission and memory budget count it.
//
// The world: the launcher (the engine's child) unshares a pid, a network
// and an IPC namespace and forks their pid 1 (reap, below), which forks
// the zygote: it sees no host process (a /proc of its own pid namespace),
// no host network (only a loopback of its own) and no host IPC object. The
// zygote makes a private mount namespace whose root is a read-only tmpfs
// (built on DIR, a directory of the engine's, in this namespace only)
// holding the image's /usr and /etc (read-only) and its top-level links
// into them, the device nodes a sandbox's /dev binds (rootfs.c), that
// /proc with nothing but its processes (subset=pid: no /proc/sys, no
// kernel files), and at their host paths exactly the paths named: --ro
// ones read-only (the image's view a sandbox's overlay is built on), --dir
// ones as empty directories (the mount point sandboxes build on, which
// each covers in its own namespace), and a writable /root of its own
// (zygote_home). It pivot_roots there (a user
// namespace cannot be made from a chroot).
//
// It keeps uid 0 and drops every capability but CAP_SETUID and CAP_SETGID
// from the bounding set, so that the exec gives the interpreter those two
// only, sets no_new_privs and installs its seccomp filter
// (zygote_seccomp.c: no uid but 0, a namespace's own ids and the --owners
// block). Not another uid with ambient capabilities: CAP_SETUID can always
// take uid 0 back, so it would protect nothing, and the spawner needs the
// effective uid 0 anyway, to write the root-owned uid_map, gid_map and
// cgroup.procs files of its children without CAP_DAC_OVERRIDE. What uid 0
// can reach without capabilities is what this root holds: no host file
// but those named, no sysctl, and no process but its own namespace's.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "home.h"
#include "zygote.h"

#define MAX_PATHS 32

static int die(const char *what, const char *arg) {
	fprintf(stderr, "scratchrun-spawn --zygote: %s%s%s: %s\n", what, arg ? " " : "", arg ? arg : "", strerror(errno));
	return 1;
}

// clean is an absolute path without "." or ".." components, which a bind
// target composed under the stage must be.
static int clean(const char *p) {
	if (p[0] != '/' || strlen(p) >= PATH_MAX / 2)
		return 0;
	for (const char *c = p; *c; c++)
		if (c[0] == '/' && c[1] == '.' && (c[2] == '/' || c[2] == 0 || (c[2] == '.' && (c[3] == '/' || c[3] == 0))))
			return 0;
	return 1;
}

// mkdirs makes path and its parents (mode 0755).
static int mkdirs(char *path) {
	for (char *c = path + 1; *c; c++) {
		if (*c != '/')
			continue;
		*c = 0;
		int rc = mkdir(path, 0755);
		*c = '/';
		if (rc < 0 && errno != EEXIST)
			return -1;
	}
	return mkdir(path, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

// bind mounts src on the same path under stage (a directory or an empty
// file made for it), then applies flags (MS_RDONLY, MS_NOSUID...).
static int bind(const char *stage, const char *src, const char *at, unsigned long flags) {
	char target[PATH_MAX];
	snprintf(target, sizeof target, "%s%s", stage, at ? at : src);
	struct stat st;
	if (stat(src, &st) < 0)
		return die("stat", src);
	if (S_ISDIR(st.st_mode)) {
		if (mkdirs(target) < 0)
			return die("create", target);
	} else {
		char *slash = strrchr(target, '/');
		*slash = 0;
		int rc = mkdirs(target);
		*slash = '/';
		int fd = rc < 0 ? -1 : open(target, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return die("create", target);
		close(fd);
	}
	if (mount(src, target, NULL, MS_BIND, NULL) < 0)
		return die("bind", src);
	if (mount(NULL, target, NULL, MS_REMOUNT | MS_BIND | flags, NULL) < 0)
		return die("remount", target);
	return 0;
}

// zygote_home mounts a tmpfs of the zygote's own on the stage's /root and
// copies the image's /root into it (copy_home_tree). A preloaded module may
// need a writable home at import (matplotlib refuses to import without a
// writable config or cache directory) and expects the caches the image
// baked there (matplotlib's font list, which it otherwise rebuilds by
// reading every font). The copy is owned by uid 0, the zygote's, which
// writes it without CAP_DAC_OVERRIDE; each sandbox's root, built by its
// own pivot_root, does not show it. The same paths are the sandbox's home,
// so what a module cached of them at import still names the right place.
static int zygote_home(const char *stage, const char *image) {
	char at[PATH_MAX], src[PATH_MAX];
	snprintf(at, sizeof at, "%s/root", stage);
	if (mkdir(at, 0700) < 0 || mount("tmpfs", at, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=20m,nr_inodes=4096,mode=0700") < 0)
		return die("mount tmpfs on", at);
	snprintf(src, sizeof src, "%s/root", image);
	int from = open(src, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (from < 0)
		return 0; // an image without /root: the home is empty
	int to = open(at, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (to < 0) {
		close(from);
		return die("open", at);
	}
	copy_home_tree(from, to);
	close(from);
	close(to);
	return 0;
}

// keep_only cuts the bounding set to CAP_SETUID and CAP_SETGID and the
// process's own sets to them too (inheritable and ambient empty).
static int keep_only(void) {
	for (int c = 0; c < 64; c++) {
		if (c == CAP_SETUID || c == CAP_SETGID)
			continue;
		if (prctl(PR_CAPBSET_DROP, c, 0, 0, 0) < 0) {
			if (errno == EINVAL)
				break; // past the kernel's last capability
			return -1;
		}
	}
	if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
		return -1;
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	data[0].permitted = data[0].effective = (1u << CAP_SETUID) | (1u << CAP_SETGID);
	return (int)syscall(SYS_capset, &hdr, data);
}

// wait_exit waits for pid and returns its exit status (128+signal if a
// signal ended it).
static int wait_exit(pid_t pid) {
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return 1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// reap is pid 1 of the zygote's pid namespace: it holds nothing (no
// capability, no descriptor), reaps every process reparented to it (a
// retired zygote's sandboxes' inits), and ends once the zygote and all of
// them are gone, with the zygote's status. Its end kills whatever is left
// in the namespace, sandboxes included: the launcher's death signal
// reaches it when the engine dies.
static int reap(pid_t zygote) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct none[2];
	memset(none, 0, sizeof none);
	// Not dumpable first: it is uid 0 in the engine's mount namespace, and
	// a dumpable process of the zygote's uid is one the zygote may open
	// /proc/1/root, /proc/1/cwd and /proc/1/mem of (ptrace's access check
	// passes for the same uid whatever the capabilities): the host's whole
	// file system. Dropping capabilities does not clear dumpable.
	if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0 || chdir("/") < 0)
		_exit(1);
	if (syscall(SYS_capset, &hdr, none) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		_exit(1);
	int status = 1, st;
	for (;;) {
		pid_t pid = wait(&st);
		if (pid == zygote)
			status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
		else if (pid < 0 && errno == ECHILD)
			return status;
	}
}

int zygote_launch(int argc, char **argv) {
	const char *stage = NULL, *image = NULL;
	const char *ro[MAX_PATHS], *dirs[MAX_PATHS], *cgroups[MAX_PATHS];
	int nro = 0, ndirs = 0, ncgroups = 0, i;
	unsigned long owner_lo = 0, owner_count = 0;
	for (i = 1; i < argc && strcmp(argv[i], "--") != 0; i++) {
		const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
		if (value && strcmp(flag, "--owners") == 0) {
			char *end;
			owner_lo = strtoul(value, &end, 10);
			owner_count = *end == ':' ? strtoul(end + 1, &end, 10) : 0;
			if (*end || owner_lo == 0 || owner_count == 0 || owner_lo + owner_count > 0xffffffffUL) {
				errno = EINVAL;
				return die("--owners wants FIRST:COUNT, got", value);
			}
			i++;
			continue;
		}
		if (!value || !clean(value)) {
			errno = EINVAL;
			return die("not an absolute clean path after", flag);
		}
		i++;
		if (strcmp(flag, "--stage") == 0)
			stage = value;
		else if (strcmp(flag, "--image") == 0)
			image = value;
		else if (strcmp(flag, "--ro") == 0 && nro < MAX_PATHS)
			ro[nro++] = value;
		else if (strcmp(flag, "--dir") == 0 && ndirs < MAX_PATHS)
			dirs[ndirs++] = value;
		else if (strcmp(flag, "--cgroup") == 0 && ncgroups < MAX_PATHS)
			cgroups[ncgroups++] = value;
		else {
			errno = EINVAL;
			return die("unknown or repeated too often:", flag);
		}
	}
	if (!stage || !image || i + 1 >= argc || argv[i + 1][0] != '/') {
		errno = EINVAL;
		return die("usage: --zygote --stage DIR --image ROOTFS [--owners FIRST:COUNT] [--cgroup PROCS]... [--ro|--dir PATH]... -- PROGRAM [ARG]...", NULL);
	}
	char **program = argv + i + 1;
	if (geteuid() != 0) {
		errno = EPERM;
		return die("must run as root", NULL);
	}
	for (int k = 0; k < ncgroups; k++) {
		int fd = open(cgroups[k], O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return die("open", cgroups[k]);
		ssize_t n = write(fd, "0", 1); // 0: the writer
		int saved = errno;
		close(fd);
		if (n != 1) {
			errno = n < 0 ? saved : EIO;
			return die("join the cgroup of", cgroups[k]);
		}
	}
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return die("pdeathsig", NULL);
	// Only the socket (3) and the shared object (4) come along.
	if (syscall(SYS_close_range, 5, ~0U, 0) < 0)
		return die("close descriptors", NULL);
	// alive's write end is held by this process only: pid 1 sees its EOF
	// if we died before its parent-death signal was armed.
	int alive[2];
	if (pipe2(alive, O_CLOEXEC) < 0)
		return die("pipe", NULL);
	if (unshare(CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC) < 0)
		return die("unshare pid, network and IPC namespaces", NULL);
	pid_t reaper = fork();
	if (reaper < 0)
		return die("fork pid 1", NULL);
	if (reaper > 0) {
		// The engine's child: it waits for pid 1, which outlives the
		// zygote while any of its sandboxes lives. Only the zygote holds
		// the socket, so the engine sees its end as soon as it ends.
		close(alive[0]);
		close(3);
		close(4);
		return wait_exit(reaper);
	}
	close(alive[1]);
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		_exit(1);
	struct pollfd parent = {.fd = alive[0], .events = POLLIN};
	if (poll(&parent, 1, 0) != 0)
		_exit(1);
	pid_t zygote = fork();
	if (zygote < 0)
		_exit(1);
	if (zygote > 0) {
		close(alive[0]);
		close(3);
		close(4);
		return reap(zygote);
	}
	close(alive[0]);
	if (unshare(CLONE_NEWNS) < 0)
		return die("unshare mount namespace", NULL);
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
		return die("make / private", NULL);
	if (mount("tmpfs", stage, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "size=1m,nr_inodes=4096,mode=0755") < 0)
		return die("mount tmpfs on", stage);
	char src[PATH_MAX], at[PATH_MAX], link[PATH_MAX];
	static const char *const image_dirs[] = {"usr", "etc"};
	for (size_t k = 0; k < sizeof image_dirs / sizeof *image_dirs; k++) {
		snprintf(src, sizeof src, "%s/%s", image, image_dirs[k]);
		snprintf(at, sizeof at, "/%s", image_dirs[k]);
		if (bind(stage, src, at, MS_RDONLY | MS_NOSUID | MS_NODEV))
			return 1;
	}
	// bin, lib, lib64, sbin: the image's links into /usr, as they are.
	static const char *const links[] = {"bin", "lib", "lib32", "lib64", "libx32", "sbin"};
	for (size_t k = 0; k < sizeof links / sizeof *links; k++) {
		snprintf(src, sizeof src, "%s/%s", image, links[k]);
		ssize_t n = readlink(src, link, sizeof link - 1);
		if (n < 0)
			continue; // none in this image
		link[n] = 0;
		if (strncmp(link, "usr/", 4) != 0 && strncmp(link, "/usr/", 5) != 0) {
			errno = EINVAL;
			return die("a top-level link out of /usr:", src);
		}
		snprintf(at, sizeof at, "%s/%s", stage, links[k]);
		if (symlink(link, at) < 0)
			return die("link", at);
	}
	static const char *const devices[] = {"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty"};
	for (size_t k = 0; k < sizeof devices / sizeof *devices; k++)
		if (bind(stage, devices[k], NULL, MS_NOSUID | MS_NOEXEC))
			return 1;
	snprintf(at, sizeof at, "%s/proc", stage);
	if (mkdir(at, 0755) < 0 || mount("proc", at, "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "subset=pid") < 0)
		return die("mount proc on", at);
	for (int k = 0; k < nro; k++)
		if (bind(stage, ro[k], NULL, MS_RDONLY | MS_NOSUID | MS_NODEV))
			return 1;
	for (int k = 0; k < ndirs; k++) {
		snprintf(at, sizeof at, "%s%s", stage, dirs[k]);
		if (mkdirs(at) < 0)
			return die("create", at);
	}
	if (zygote_home(stage, image))
		return 1;
	if (mount(NULL, stage, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0)
		return die("remount read-only", stage);
	if (chdir(stage) < 0 || syscall(SYS_pivot_root, ".", ".") < 0 || umount2(".", MNT_DETACH) < 0 || chdir("/") < 0)
		return die("pivot_root to", stage);
	if (keep_only() < 0)
		return die("drop capabilities", NULL);
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
		return die("no_new_privs", NULL);
	if (zygote_seccomp((uint32_t)owner_lo, (uint32_t)owner_count) < 0)
		return die("install the seccomp filter", NULL);
	extern char **environ;
	execve(program[0], program, environ);
	return die("exec", program[0]);
}
