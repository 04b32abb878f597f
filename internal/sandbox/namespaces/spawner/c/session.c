// A session sandbox's init: jobs one after another (see session.h).
//
// Each job runs under a keeper, a fork of init that is a child subreaper:
// whatever the job starts, however it detaches (setsid, double forks),
// reparents to the keeper rather than to init, so the job's whole process
// tree is the keeper's descendants. A timeout (or a cancel) kills exactly
// those, walking /proc, and leaves the session's other processes (those of
// earlier jobs) alone. A job that ends normally keeps its background
// processes: the keeper stays to reap them and exits when none is left.
//
// Init does not trust what user code left behind: the files it writes and
// reads between jobs are resolved within the sandbox's root, never through
// a link out of it, never into a kernel pseudo-file system (safe_write,
// and read_in_root for reads).
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "job.h"
#include "kernel.h"
#include "session.h"
#include "util.h"

#ifndef MQUEUE_MAGIC
#define MQUEUE_MAGIC 0x19800202
#endif

// end_session kills everything in the sandbox and exits: the engine ended
// the session, went away, or sent what init cannot follow.
void end_session(void) {
	kill(-1, SIGKILL);
	reap_all();
	_exit(0);
}

// keep is the keeper's life: start the program, report its end, and reap
// every descendant until none is left.
static void __attribute__((noreturn)) keep(struct job *j, int report) {
	// Init's descriptors are not the job's: nothing of the engine's
	// protocol stays open in a process user code shares a uid with.
	close(INIT_CONTROL_FD);
	close(INIT_STATUS_FD);
	close(INIT_UPPER_FD);
	kernels_close_fds();
	struct keeper_report rep;
	memset(&rep, 0, sizeof rep);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		fail("make the job's keeper a subreaper");
		snprintf(rep.error, sizeof rep.error, "%s", err_text);
		(void)!write_full(report, &rep, sizeof rep);
		_exit(0);
	}
	pid_t pid = start_process(j->argv, j->env, j->dir, -1, -1);
	if (pid < 0) {
		snprintf(rep.error, sizeof rep.error, "%s", err_text);
		(void)!write_full(report, &rep, sizeof rep);
		_exit(0);
	}
	rep.started = 1;
	for (;;) {
		int st;
		pid_t got = waitpid(-1, &st, 0);
		if (got == pid) {
			// The pipe stays open until the keeper exits: its hang-up
			// tells init that the job's whole tree is gone (separate).
			rep.status = st;
			(void)!write_full(report, &rep, sizeof rep);
		} else if (got < 0 && errno != EINTR) {
			_exit(0); // no child left
		}
	}
}

// MAX_PROCS bounds one walk of /proc: far above any sandbox's pids limit.
#define MAX_PROCS 65536

// descendants walks /proc (proc, opened before user code ran, so that no
// mount over /proc can hide a process) and sends sig to every descendant
// of keeper (sig 0: only counts them). It returns how many it found.
int descendants(int proc, pid_t keeper, int sig) {
	int fd = dup(proc);
	DIR *d = fd < 0 ? NULL : fdopendir(fd);
	if (!d) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	rewinddir(d);
	static pid_t pids[MAX_PROCS], ppids[MAX_PROCS];
	static char mine[MAX_PROCS];
	int n = 0;
	struct dirent *e;
	while (n < MAX_PROCS && (e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (*end || pid <= 1)
			continue;
		char path[64], buf[512];
		snprintf(path, sizeof path, "%ld/stat", pid);
		int sfd = openat(dirfd(d), path, O_RDONLY | O_CLOEXEC);
		if (sfd < 0)
			continue;
		ssize_t got = read(sfd, buf, sizeof buf - 1);
		close(sfd);
		if (got <= 0)
			continue;
		buf[got] = 0;
		// "pid (comm) state ppid ...": comm may hold anything but ends at
		// the last parenthesis.
		char *paren = strrchr(buf, ')');
		int ppid;
		char state;
		if (!paren || sscanf(paren + 1, " %c %d", &state, &ppid) != 2)
			continue;
		pids[n] = (pid_t)pid, ppids[n] = ppid, mine[n] = 0;
		n++;
	}
	closedir(d);
	// Mark descendants until a pass adds none: a tree at most n deep.
	for (int changed = 1; changed;) {
		changed = 0;
		for (int i = 0; i < n; i++) {
			if (mine[i])
				continue;
			int up = ppids[i] == keeper;
			for (int k = 0; !up && k < n; k++)
				up = mine[k] && pids[k] == ppids[i];
			if (up)
				mine[i] = 1, changed = 1;
		}
	}
	int found = 0;
	for (int i = 0; i < n; i++) {
		if (!mine[i] || pids[i] == keeper)
			continue;
		found++;
		if (sig)
			kill(pids[i], sig);
	}
	return found;
}

// read_report reads the keeper's report if one is waiting (1), or sees
// the keeper gone without one (-1); 0 while neither.
int read_report(int fd, struct keeper_report *rep) {
	ssize_t got;
	do
		got = read(fd, rep, sizeof *rep);
	while (got < 0 && errno == EINTR);
	if (got == (ssize_t)sizeof *rep)
		return 1;
	if (got < 0 && errno == EAGAIN)
		return 0;
	return -1;
}

// separate kills the keeper's descendants until the keeper, with nothing
// left to reap, exits (its report pipe hangs up), at most
// INIT_SEPARATE_WITHIN_MS; 1 when it did. rep gets the keeper's report if
// it comes meanwhile.
int separate(int proc, pid_t keeper, int report, struct keeper_report *rep, int *reported) {
	uint64_t deadline = now_ns() + (uint64_t)INIT_SEPARATE_WITHIN_MS * 1000000u;
	for (;;) {
		descendants(proc, keeper, SIGKILL);
		struct pollfd p = {.fd = report, .events = POLLIN};
		struct timespec step = {.tv_sec = 0, .tv_nsec = 10 * 1000000};
		if (ppoll(&p, 1, &step, NULL) > 0) {
			int r = *reported ? -1 : read_report(report, rep);
			if (r > 0)
				*reported = 1;
			else if (r < 0)
				return 1; // hung up: the keeper has reaped everything
		}
		if (now_ns() >= deadline)
			return 0;
	}
}

// fstype_refused reports whether fd lies on a kernel pseudo-file system
// that init must neither read nor write for a job.
static int fstype_refused(int fd) {
	struct statfs fs;
	if (fstatfs(fd, &fs) < 0)
		return 1;
	return fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC || fs.f_type == DEVPTS_SUPER_MAGIC ||
	       fs.f_type == MQUEUE_MAGIC;
}

static int open_dir_in_root(int root, const char *path) {
	struct open_how how = {
	    .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
	    .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	return (int)syscall(SYS_openat2, root, path, &how, sizeof how);
}

// safe_write writes a file after user code may have run: its parent is
// resolved within root (a symbolic link is followed only inside the
// sandbox's tree, never through /proc's magic links), missing parents made
// one at a time below the parent already resolved; the parent must not be
// a kernel pseudo-file system, and the file itself must be a regular file
// (or new): a link, fifo or device in its place is refused, not followed
// or opened for writing.
int safe_write(int root, const char *path, const char *data, size_t len) {
	if (path[0] != '/' || !path[1] || path[strlen(path) - 1] == '/') {
		errno = EINVAL;
		return fail("files[\"%s\"]: not an absolute file path", path);
	}
	char *copy = xstrdup(path);
	char *base = strrchr(copy, '/');
	*base++ = 0;
	int dir = open_dir_in_root(root, "/");
	// Each prefix of the parent resolved anew from the root, so that a
	// link among its components resolves as the sandbox sees it. A file
	// right below the root has no prefix to walk ("" after the cut).
	for (char *c = copy[0] ? copy + 1 : NULL; dir >= 0 && c && *c;) {
		char *slash = strchr(c, '/');
		if (slash)
			*slash = 0;
		int next = open_dir_in_root(root, copy);
		if (next < 0 && errno == ENOENT) {
			if (mkdirat(dir, c, 0755) < 0 && errno != EEXIST) {
				int rc = fail("files[\"%s\"]: create parent directory %s", path, copy);
				close(dir);
				free(copy);
				return rc;
			}
			next = open_dir_in_root(root, copy);
		}
		close(dir);
		dir = next;
		if (!slash)
			break;
		*slash = '/';
		c = slash + 1;
	}
	if (dir < 0) {
		int rc = fail("files[\"%s\"]: open parent directory", path);
		free(copy);
		return rc;
	}
	int rc = 0;
	struct stat st;
	if (fstype_refused(dir)) {
		errno = EPERM;
		rc = fail("files[\"%s\"]: the parent directory is a kernel pseudo-file system", path);
	} else if (fstatat(dir, base, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(st.st_mode)) {
		errno = S_ISLNK(st.st_mode) ? ELOOP : EINVAL;
		rc = fail("files[\"%s\"]: it exists and is not a regular file", path);
	} else {
		int fd = openat(dir, base, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
		if (fd < 0) {
			rc = fail("files[\"%s\"]", path);
		} else {
			// Swapped in since the fstatat: refuse before writing.
			if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
				errno = EINVAL;
				rc = fail("files[\"%s\"]: not a regular file", path);
			} else if (write_full(fd, data, len) < 0) {
				rc = fail("files[\"%s\"]", path);
			}
			close(fd);
		}
	}
	close(dir);
	free(copy);
	return rc;
}

// session_job runs one job of the session and reports it.
static void session_job(const struct setup *s, int proc, int root, struct job *j) {
	struct result res = {0};
	for (uint32_t i = 0; i < j->file_count; i++) {
		if (safe_write(root, j->file_paths[i], j->file_data[i], j->file_lens[i]) < 0) {
			res.error = err_text;
			goto send;
		}
	}
	if (lock_down(s) < 0) {
		res.error = err_text;
		goto send;
	}
	if (j->resident_key[0]) {
		resident_job(proc, j, &res);
		if (!res.error)
			collect_return_files(&res, j);
		goto send;
	}
	int report[2];
	if (pipe2(report, O_CLOEXEC) < 0) {
		fail("start the job's keeper: pipe");
		res.error = err_text;
		goto send;
	}
	uint64_t start = now_ns();
	pid_t keeper = fork();
	if (keeper < 0) {
		fail("start the job's keeper");
		res.error = err_text;
		close(report[0]);
		close(report[1]);
		goto send;
	}
	if (keeper == 0) {
		close(report[0]);
		keep(j, report[1]);
	}
	close(report[1]);
	fcntl(report[0], F_SETFL, O_NONBLOCK);
	uint64_t deadline = start + j->timeout_ns;
	if (deadline < start)
		deadline = UINT64_MAX;

	struct keeper_report rep;
	memset(&rep, 0, sizeof rep);
	int reported = 0, lost = 0, stop = 0;
	while (!reported && !lost && !stop) {
		uint64_t now = now_ns();
		if (now >= deadline) {
			stop = 1;
			res.flags |= RESULT_TIMED_OUT;
			break;
		}
		uint64_t left = deadline - now;
		struct timespec wait = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
		struct pollfd p[2] = {{.fd = report[0], .events = POLLIN}, {.fd = INIT_CONTROL_FD, .events = POLLIN}};
		if (ppoll(p, 2, &wait, NULL) < 0)
			continue;
		if (p[0].revents) {
			int r = read_report(report[0], &rep);
			if (r > 0)
				reported = 1;
			else if (r < 0)
				lost = 1;
		}
		if (!reported && !lost && p[1].revents) {
			// Only a cancel may come while a job runs; end of file (or
			// anything else) ends the session.
			struct reader r;
			struct request q;
			memset(&q, 0, sizeof q);
			unsigned char *body = read_message(INIT_MAX_JOB_BYTES, &r);
			if (!body || parse_request(&r, &q) < 0 || q.kind != REQUEST_CANCEL)
				end_session();
			free(body);
			stop = 1;
			res.flags |= RESULT_TIMED_OUT;
		}
	}
	if (reported && !rep.started) {
		res.error = rep.error;
		waitpid(keeper, NULL, 0);
		close(report[0]);
		goto send;
	}
	res.flags |= RESULT_STARTED;
	if (stop) {
		if (separate(proc, keeper, report[0], &rep, &reported))
			res.flags |= RESULT_SEPARATED;
		res.duration_ns = now_ns() - start;
		if (!reported)
			rep.status = SIGKILL; // as the kill left it
	} else if (lost) {
		// The job killed its own keeper: its processes reparented to
		// init, among the session's, and its end is unknown.
		res.duration_ns = now_ns() - start;
		rep.status = SIGKILL;
		result_add_note(&res, "The call's keeper process was killed, so its processes could not be told apart from the session's.");
	} else {
		res.duration_ns = now_ns() - start;
		res.flags |= RESULT_SEPARATED;
		res.left = (uint64_t)descendants(proc, keeper, 0);
	}
	close(report[0]);
	if (WIFSIGNALED(rep.status)) {
		res.signal = WTERMSIG(rep.status);
		res.exit_code = 128 + res.signal;
	} else {
		res.exit_code = WEXITSTATUS(rep.status);
	}
	collect_return_files(&res, j);
send:
	send_result(&res);
}

// file_read answers a file read request: the file read as a return file
// is, at most max bytes.
static void file_read(int root, const struct request *q) {
	char why[256] = "", error[1024];
	size_t len = 0;
	char *data = read_in_root(root, q->path, q->max, &len, why, sizeof why);
	if (!data) {
		snprintf(error, sizeof error, "%s: %s", q->path, why);
		send_file(NULL, 0, error);
		return;
	}
	send_file(data, len, NULL);
	free(data);
}

static void free_list(char **v) {
	if (!v)
		return;
	for (char **p = v; *p; p++)
		free(*p);
	free(v);
}

// free_request frees what parse_request allocated (a session reads many).
static void free_request(struct request *q) {
	struct job *j = &q->job;
	free_list(j->argv);
	free_list(j->env);
	free_list(j->return_files);
	free(j->dir);
	for (uint32_t i = 0; j->file_paths && i < j->file_count; i++) {
		free(j->file_paths[i]);
		free(j->file_data[i]);
	}
	free(j->file_paths);
	free(j->file_data);
	free(j->file_lens);
	free(j->resident_key);
	free_list(j->resident_argv);
	free_list(j->resident_env);
	free(j->resident_dir);
	free(j->resident_request);
	free(q->path);
	free(q->data);
	memset(q, 0, sizeof *q);
}

void run_session(const struct setup *s) {
	// Opened before any user code runs: what a job later mounts or links
	// cannot change what these name.
	int proc = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	int root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (proc < 0 || root < 0)
		end_session();
	for (;;) {
		// Keepers that are done, and orphans of killed keepers.
		while (waitpid(-1, NULL, WNOHANG) > 0) {
		}
		struct reader r;
		struct request q;
		memset(&q, 0, sizeof q);
		unsigned char *body = read_message(INIT_MAX_JOB_BYTES, &r);
		if (!body)
			end_session();
		int parsed = parse_request(&r, &q);
		free(body);
		if (parsed < 0) {
			if (q.kind == REQUEST_JOB) {
				struct result res = {.error = "malformed job message"};
				send_result(&res);
			}
			end_session();
		}
		switch (q.kind) {
		case REQUEST_JOB:
			session_job(s, proc, root, &q.job);
			break;
		case REQUEST_FILE_READ:
			file_read(root, &q);
			break;
		case REQUEST_FILE_WRITE:
			send_file(NULL, 0, safe_write(root, q.path, q.data, q.data_len) < 0 ? err_text : NULL);
			break;
		case REQUEST_CANCEL:
			break; // its job has already reported
		default:
			end_session();
		}
		free_request(&q);
	}
}
