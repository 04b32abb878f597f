// Confinement of the sandbox init and everything it starts (see confine.h).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "confine.h"
#include "util.h"

// limit_user_namespace writes the setup's /proc/sys/user settings under the
// proc mount at proc. They belong to the writer's user namespace (the
// sandbox's, where init holds CAP_SYS_RESOURCE), whichever proc mount
// is used; a file this kernel lacks (older ones have no fanotify limits)
// is skipped.
int limit_user_namespace(const char *proc, const struct setup *s) {
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
int set_rlimits(const struct setup *s) {
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

// locked_down is set once lock_down has run.
static int locked_down;

// lock_down is the last step before user code: a cgroup namespace rooted at
// the sandbox's cgroup, the capability cuts, init made unreadable to
// ptrace, and the seccomp filter. The first call does it (when the setup
// came, for a warm sandbox; when the job came, otherwise); later calls do
// nothing.
int lock_down(const struct setup *s) {
	if (locked_down)
		return 0;
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
