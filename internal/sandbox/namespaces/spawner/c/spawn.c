// scratchrun-spawn: creates sandbox init processes in fresh namespaces for
// the engine. Written in C because Go cannot: a Go program that clones with
// CLONE_NEWUSER must fork its whole address space (Go drops CLONE_VM and
// CLONE_VFORK for user namespaces, golang/go#20676), and the engine paid that
// copy, plus a copy-on-write fault for every page it touched afterwards, on
// every sandbox: 11-14 ms per sandbox with a 7.5 MB heap on our 2-core test
// machine, against about 4.5 ms for this program's tiny address space. (runc
// and crun do the same part in C for the same reason.)
//
// Protocol, on the SOCK_SEQPACKET socket at fd 3:
//   hello:    at start, PROTOCOL_VERSION as a uint32 (the engine checks it).
//   request:  struct request, then its strings (see below), with SCM_RIGHTS
//             descriptors: the child's stdout, stderr, fd 3 and fd 4, the
//             network namespace to join when want_netns is set, then with
//             cgroup_fds the cgroup.procs files to write the child into.
//   reply:    struct reply, with the child's pidfd (SCM_RIGHTS) on success.
// One request at a time. The child joins its cgroups (written here while it
// waits, so no pid can have been recycled and everything init does is
// charged to the sandbox), then becomes the sandbox's init (init.c) without
// an exec; the reply comes once it has (or has failed to). The program exits
// when the engine closes the socket, and dies with the engine
// (PR_SET_PDEATHSIG); each child dies with it.
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "init.h"
#include "zygote.h"

#define SOCKET_FD 3
#define PROTOCOL_VERSION 7
#define MAX_REQUEST (256 * 1024)
#define CHILD_FDS 4 // stdout, stderr, fd 3, fd 4

// Namespaces a request may ask for, and those it must: init builds a whole
// sandbox and must get every one (the network one may be joined instead; the
// cgroup one init makes itself, once it is in its cgroup).
#define ALLOWED_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP)
#define REQUIRED_FLAGS (CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWIPC | CLONE_NEWUTS)

// MAX_CGROUPS bounds the cgroup.procs files of a request (one per
// hierarchy).
#define MAX_CGROUPS 8

// request is followed by NUL-terminated strings: the uid_map text, the
// gid_map text, then cgroupc cgroup.procs paths (none with cgroup_fds). The Go side mirrors it
// (spawner.go's request), and TestRequestLayoutMatchesC checks the two.
struct request {
	uint32_t version;
	uint32_t want_netns;     // 1: the last descriptor is a netns to be born in
	uint64_t clone_flags;    // CLONE_NEW* namespaces
	uint32_t deny_setgroups; // write "deny" to setgroups (unprivileged maps)
	uint32_t strings_len;
	uint32_t cgroupc;
	uint32_t owner_uid; // not 0: the user namespace's owner (see clone_as)
	// cgroup_fds: 1 when the cgroupc cgroup.procs files come as descriptors
	// (opened by the engine, which the kernel checks the write against)
	// rather than paths: a zygote has no cgroup file system to open them in.
	uint32_t cgroup_fds;
	uint32_t reserved; // 0
};

struct reply {
	int32_t pid;
	int32_t err; // errno of the failed step, 0 on success
	char step[64];
};

static int home_netns = -1;
static pid_t engine_pid;

// clone_as clones with flags while the effective uid is owner (when not 0),
// then takes root's back. A new user namespace is owned by the effective
// uid of its creator, and the kernel charges what is counted per user
// inside it (inotify instances, queued signals, message queue bytes...) to
// its owner as well (kernel/ucount.c): with root as the owner, one sandbox
// could exhaust host root's quotas, and every sandbox shared one count.
// The real and saved uids stay 0, so root's capabilities come back with
// the effective uid, and the maps are still written by root. Changing the
// effective uid clears the parent-death signal: it is armed again, and a
// helper whose engine died meanwhile stops.
static pid_t clone_as(uint32_t owner, unsigned long flags) {
	if (owner && setresuid(-1, owner, -1) < 0)
		return -1;
	pid_t pid = syscall(SYS_clone, flags, 0, 0, 0, 0);
	if (pid == 0 || !owner)
		return pid;
	int saved = errno;
	if (setresuid(-1, 0, -1) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != engine_pid)
		_exit(1); // not root again, or orphaned: serve nothing more
	errno = saved;
	return pid;
}

static int send_reply(int pid, int err, const char *step, int pidfd) {
	struct reply r = {.pid = pid, .err = err};
	snprintf(r.step, sizeof r.step, "%s", step ? step : "");
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof r};
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} control;
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
	if (pidfd >= 0) {
		memset(&control, 0, sizeof control);
		msg.msg_control = control.buf;
		msg.msg_controllen = sizeof control.buf;
		struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pidfd, sizeof(int));
	}
	return sendmsg(SOCKET_FD, &msg, MSG_NOSIGNAL) < 0 ? -1 : 0;
}

static int write_file(const char *path, const char *data) {
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = strlen(data);
	ssize_t w = write(fd, data, n);
	int saved = w < 0 ? errno : EIO;
	close(fd);
	errno = saved;
	return w == (ssize_t)n ? 0 : -1;
}

// close_from closes every descriptor from first on: close_range where the
// kernel has it (5.11), else by listing them, in passes (the listing holds
// a descriptor of its own) until one finds nothing left to close.
static int close_from(int first) {
	if (syscall(SYS_close_range, first, ~0U, 0) == 0)
		return 0;
	for (int pass = 0; pass < 64; pass++) {
		DIR *d = opendir("/proc/self/fd");
		if (!d)
			return -1;
		struct dirent *e;
		int fds[1024], n = 0;
		while ((e = readdir(d)) && n < 1024) {
			int fd = atoi(e->d_name);
			if (fd >= first && fd != dirfd(d))
				fds[n++] = fd;
		}
		closedir(d);
		if (n == 0)
			return 0;
		for (int i = 0; i < n; i++)
			close(fds[i]);
	}
	errno = EMFILE;
	return -1;
}

// child runs in the new namespaces until it becomes the sandbox's init. It
// is a plain fork of this process (a raw clone: glibc's fork handlers did
// not run), so it may use malloc and stdio only because this program is
// single-threaded and holds no lock while it clones: keep it
// single-threaded.
static void child(int sync_r, int err_w, int fds[CHILD_FDS], const struct request *req) {
	char go;
	int err = 0;
	const char *step = "";
	// Wait until the parent has written our uid and gid maps and put us in
	// our cgroups (EOF: it died).
	if (read(sync_r, &go, 1) != 1)
		_exit(127);
	if (!req->deny_setgroups && setgroups(0, NULL) < 0) {
		step = "setgroups";
		goto fail;
	}
	if (setresgid(0, 0, 0) < 0) {
		step = "setresgid";
		goto fail;
	}
	if (setresuid(0, 0, 0) < 0) {
		step = "setresuid";
		goto fail;
	}
	// A session of its own: kill(0, sig) inside must not reach the engine.
	if (setsid() < 0) {
		step = "setsid";
		goto fail;
	}
	// A zygote's sandboxes outlive it (a retired zygote's running ones):
	// they die with the engine through the pid 1 of the zygote's pid
	// namespace (zygote_launch.c), whose end kills the namespace.
	if (!zygote_mode && prctl(PR_SET_PDEATHSIG, SIGKILL) < 0) {
		step = "pdeathsig";
		goto fail;
	}
	// The parent keeps its end open until we run init: if it died before
	// the line above, the death signal was never armed; stop here.
	struct pollfd parent = {.fd = sync_r, .events = POLLIN};
	if (poll(&parent, 1, 0) != 0)
		_exit(127);
	close(sync_r);
	// Move the received descriptors clear of 0-4 first, then into place
	// (dup2 clears close-on-exec on the copies; init marks its control and
	// status descriptors itself, so that only 0-2 reach user code).
	int high[CHILD_FDS];
	for (int i = 0; i < CHILD_FDS; i++) {
		high[i] = fcntl(fds[i], F_DUPFD_CLOEXEC, 16);
		if (high[i] < 0) {
			step = "dup";
			goto fail;
		}
	}
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (devnull >= 0 && devnull < 16) {
		int high_null = fcntl(devnull, F_DUPFD_CLOEXEC, 16);
		close(devnull);
		devnull = high_null;
	}
	if (devnull < 0 || dup2(devnull, 0) < 0) {
		step = "stdin";
		goto fail;
	}
	for (int i = 0; i < CHILD_FDS; i++) {
		if (dup2(high[i], i + 1) < 0) {
			step = "dup2";
			goto fail;
		}
	}
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	for (int s = 1; s < NSIG; s++)
		signal(s, SIG_DFL); // what init starts must find every signal at its default
	// Nothing else of ours stays open in init; closing the error pipe
	// tells the parent that init runs.
	if (close_from(CHILD_FDS + 1) < 0) {
		step = "close descriptors";
		goto fail;
	}
	prctl(PR_SET_NAME, "init");
	sandbox_init();
fail:
	err = errno;
	{
		struct reply r = {.pid = 0, .err = err};
		snprintf(r.step, sizeof r.step, "%s", step);
		(void)!write(err_w, &r, sizeof r);
	}
	_exit(127);
}

// request_buf holds the request being served (zeroed after each).
static char request_buf[MAX_REQUEST];

void spawner_forget(void) { explicit_bzero(request_buf, sizeof request_buf); }

// spawn serves one request; it returns -1 only when the socket is gone.
static int spawn(void) {
	char *buf = request_buf;
	union {
		char buf[CMSG_SPACE((CHILD_FDS + 1 + MAX_CGROUPS) * sizeof(int))];
		struct cmsghdr align;
	} control;
	struct iovec iov = {.iov_base = buf, .iov_len = sizeof request_buf};
	struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = control.buf, .msg_controllen = sizeof control.buf};
	ssize_t n = recvmsg(SOCKET_FD, &msg, MSG_CMSG_CLOEXEC);
	if (n <= 0)
		return -1;
	int fds[CHILD_FDS + 1 + MAX_CGROUPS];
	int nfds = 0;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < count; i++) {
			int fd;
			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (nfds < CHILD_FDS + 1 + MAX_CGROUPS)
				fds[nfds++] = fd;
			else
				close(fd);
		}
	}
	int result = 0;
	struct request req;
	// The strings: uid_map, gid_map, then the cgroup.procs paths.
	char *strs[2 + MAX_CGROUPS];
	if ((size_t)n < sizeof req || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		result = send_reply(0, EINVAL, "request truncated", -1);
		goto done;
	}
	memcpy(&req, buf, sizeof req);
	if (req.version != PROTOCOL_VERSION || req.strings_len != n - sizeof req ||
	    (req.owner_uid && !(req.clone_flags & CLONE_NEWUSER)) || req.cgroupc > MAX_CGROUPS ||
	    req.cgroup_fds > 1 || req.reserved != 0 ||
	    nfds != CHILD_FDS + (req.want_netns ? 1 : 0) + (req.cgroup_fds ? (int)req.cgroupc : 0) || buf[n - 1] != 0 ||
	    (req.clone_flags & ~(uint64_t)ALLOWED_FLAGS) || (req.clone_flags & REQUIRED_FLAGS) != REQUIRED_FLAGS ||
	    (req.want_netns && (req.clone_flags & CLONE_NEWNET)) || !(req.want_netns || (req.clone_flags & CLONE_NEWNET))) {
		result = send_reply(0, EINVAL, "malformed request", -1);
		goto done;
	}
	{
		char *p = buf + sizeof req, *end = buf + n;
		for (uint32_t i = 0; i < 2 + (req.cgroup_fds ? 0 : req.cgroupc); i++) {
			if (p >= end) {
				result = send_reply(0, EINVAL, "missing strings", -1);
				goto done;
			}
			strs[i] = p;
			p += strlen(p) + 1;
		}
	}
	const char *uid_map = strs[0], *gid_map = strs[1];
	char **cgroups = strs + 2;

	int sync_pipe[2], err_pipe[2];
	if (pipe2(sync_pipe, O_CLOEXEC) < 0) {
		result = send_reply(0, errno, "pipe", -1);
		goto done;
	}
	if (pipe2(err_pipe, O_CLOEXEC) < 0) {
		result = send_reply(0, errno, "pipe", -1);
		close(sync_pipe[0]);
		close(sync_pipe[1]);
		goto done;
	}
	if (req.want_netns && setns(fds[CHILD_FDS], CLONE_NEWNET) < 0) {
		result = send_reply(0, errno, "join network namespace", -1);
		goto close_pipes;
	}
	pid_t pid = clone_as(req.owner_uid, (unsigned long)(req.clone_flags | SIGCHLD));
	if (pid == 0) {
		close(sync_pipe[1]);
		close(err_pipe[0]);
		child(sync_pipe[0], err_pipe[1], fds, &req);
	}
	int clone_errno = errno;
	// Stuck in a sandbox's network namespace: stop rather than serve from
	// the wrong place (the engine sees the socket close).
	if (req.want_netns && setns(home_netns, CLONE_NEWNET) < 0)
		exit(1);
	if (pid < 0) {
		result = send_reply(0, clone_errno, "clone", -1);
		goto close_pipes;
	}
	close(sync_pipe[0]);
	sync_pipe[0] = -1;
	close(err_pipe[1]);
	err_pipe[1] = -1;
	// The pidfd is taken before the child may run (it waits for the maps),
	// so it cannot name a recycled pid.
	int pidfd = syscall(SYS_pidfd_open, pid, 0);
	char file[64];
	const char *step = NULL;
	int err = 0;
	if (pidfd < 0) {
		err = errno, step = "pidfd_open";
	} else if (zygote_mode && zygote_as_owner(req.owner_uid) < 0) {
		err = errno, step = "take the owner's uid to write the maps";
	} else {
		snprintf(file, sizeof file, "/proc/%d/uid_map", pid);
		if (write_file(file, uid_map) < 0) {
			err = errno, step = "write uid_map";
		} else {
			snprintf(file, sizeof file, "/proc/%d/setgroups", pid);
			if (req.deny_setgroups && write_file(file, "deny") < 0) {
				err = errno, step = "write setgroups";
			} else {
				snprintf(file, sizeof file, "/proc/%d/gid_map", pid);
				if (write_file(file, gid_map) < 0)
					err = errno, step = "write gid_map";
			}
		}
	}
	if (zygote_mode)
		zygote_as_root(engine_pid);
	char pidtext[16];
	snprintf(pidtext, sizeof pidtext, "%d", pid);
	int *cgroup_fds = fds + CHILD_FDS + (req.want_netns ? 1 : 0);
	for (uint32_t i = 0; !err && i < req.cgroupc; i++) {
		if (req.cgroup_fds) {
			ssize_t w = write(cgroup_fds[i], pidtext, strlen(pidtext));
			if (w != (ssize_t)strlen(pidtext))
				err = w < 0 ? errno : EIO, step = "join cgroup";
		} else if (write_file(cgroups[i], pidtext) < 0) {
			err = errno, step = "join cgroup";
		}
	}
	if (err) {
		if (pidfd >= 0) {
			syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
			close(pidfd);
		} else {
			kill(pid, SIGKILL); // still blocked on the sync pipe: not yet reapable
		}
		result = send_reply(0, err, step, -1);
		goto close_pipes;
	}
	(void)!write(sync_pipe[1], "g", 1);
	// EOF: the child runs init (which closed the pipe).
	struct reply failed;
	ssize_t got;
	do
		got = read(err_pipe[0], &failed, sizeof failed);
	while (got < 0 && errno == EINTR);
	if (got == sizeof failed) {
		close(pidfd);
		result = send_reply(0, failed.err, failed.step, -1);
	} else {
		result = send_reply(pid, 0, NULL, pidfd);
		close(pidfd);
	}
close_pipes:
	if (sync_pipe[0] >= 0)
		close(sync_pipe[0]);
	close(sync_pipe[1]);
	close(err_pipe[0]);
	if (err_pipe[1] >= 0)
		close(err_pipe[1]);
done:
	for (int i = 0; i < nfds; i++)
		close(fds[i]);
	// Every later child is a copy of this memory: leave no request in it.
	explicit_bzero(buf, (size_t)n);
	return result;
}

// spawner_serve is the helper's life: the hello, then requests until the
// engine closes the socket (0) or something fails (1). main runs it, and so
// does a zygote (zygote.c) from inside its interpreter.
int spawner_serve(void) {
	// If the engine died before this, the socket's EOF ends us below.
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0)
		return 1;
	engine_pid = getppid();
	// Children are reaped by the kernel; the engine learns of their exit
	// from the pidfd.
	signal(SIGCHLD, SIG_IGN);
	signal(SIGPIPE, SIG_IGN);
	if (chdir("/") < 0)
		return 1;
	home_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	if (home_netns < 0)
		return 1;
	uint32_t version = PROTOCOL_VERSION;
	if (send(SOCKET_FD, &version, sizeof version, MSG_NOSIGNAL) != sizeof version)
		return 1;
	while (spawn() == 0) {
	}
	return 0;
}

#ifndef SCRATCHRUN_SHARED
int main(int argc, char **argv) {
	if (argc > 1 && strcmp(argv[1], "--zygote") == 0)
		return zygote_launch(argc - 1, argv + 1);
	return spawner_serve();
}
#endif
