// The sandbox's one job (see job.h).
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "confine.h"
#include "job.h"
#include "util.h"
#include "zygote.h"

// place_fd makes fd the child's fd target (fd == target: only not
// close-on-exec).
static int place_fd(int fd, int target) {
	if (fd == target)
		return fcntl(fd, F_SETFD, 0);
	return dup2(fd, target) < 0 ? -1 : 0;
}

// start_process starts argv (an absolute path, not looked up) in dir with
// env, stdin /dev/null, init's stdout and stderr, and fd3 and fd4 (each if
// not -1) as its fds 3 and 4. It returns the pid, or -1 with err_text set, once the program
// has been executed: an exec failure is reported here, as Go's ForkExec
// reports it, not as an exit status.
pid_t start_process(char **argv, char **env, const char *dir, int fd3, int fd4) {
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
		else if (fd4 >= 0 && fd4 <= 4 && (fd4 = fcntl(fd4, F_DUPFD_CLOEXEC, 5)) < 0)
			err = errno; // out of the way of fd 3 (fd3 may be 4)
		else if (fd3 >= 0 && fd3 != 3 && dup2(fd3, 3) < 0)
			err = errno;
		else if (fd3 == 3 && fcntl(3, F_SETFD, 0) < 0)
			err = errno;
		else if (fd4 >= 0 && place_fd(fd4, 4) < 0)
			err = errno;
		else if (dir[0] && chdir(dir) < 0)
			err = errno;
		else if (zygote_entering) {
			zygote_enter(argv[0]); // returns only if it failed
			err = errno;
		} else {
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

// prestart starts the setup's interpreter with a pipe on its fd 3; it
// returns pid 0 when it could not (the job then starts cold).
struct prestarted prestart(const struct setup *s) {
	struct prestarted p = {0, -1};
	int pipe_fds[2];
	if (pipe2(pipe_fds, O_CLOEXEC) < 0)
		return p;
	zygote_entering = zygote_mode; // a zygote's interpreter is forked, not executed
	zygote_host_paths[0] = s->rootfs, zygote_host_paths[1] = s->mount_dir;
	pid_t pid = start_process(s->prestart_argv, s->prestart_env, s->prestart_dir, pipe_fds[0], -1);
	zygote_entering = 0;
	zygote_host_paths[0] = zygote_host_paths[1] = NULL;
	close(pipe_fds[0]);
	if (pid < 0) {
		close(pipe_fds[1]);
		return p;
	}
	p.pid = pid, p.control = pipe_fds[1];
	return p;
}

// write_files stages the input files. It runs after pivot_root and before
// any user code, so every path resolves in the sandbox's own tree, which
// holds only the trusted image yet.
static int write_files(const struct job *j) {
	for (uint32_t i = 0; i < j->file_count; i++) {
		const char *path = j->file_paths[i];
		char *parent = xstrdup(path);
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
// and environment as NUL-ended fields: initproto.PrestartJob) and returns its
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

uint64_t now_ns(void) {
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

void reap_all(void) {
	while (waitpid(-1, NULL, 0) > 0 || errno == EINTR) {
	}
}

// read_in_root reads one return file. The path resolves with
// RESOLVE_IN_ROOT against the sandbox's root, so a symlink (absolute or full
// of "..") cannot leave the sandbox's tree, and RESOLVE_NO_MAGICLINKS
// refuses /proc/<pid>/fd and /proc/<pid>/root jumps. Only regular files
// outside /proc and /sys qualify; one larger than what is left of the
// budget is skipped whole (a cut binary file is worse than none).
char *read_in_root(int root, const char *path, uint64_t budget, size_t *len, char *why, size_t why_size) {
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

// run_job runs the job and sends its result; see the reaper's runJob and
// runProgram in package goinit for the Go init's twin.
void run_job(const struct setup *s, struct job *j, struct prestarted *warm) {
	struct result res = {0};
	if (write_files(j) < 0 || lock_down(s) < 0) {
		res.error = err_text;
		goto send;
	}
	uint64_t start = now_ns();
	pid_t pid = deliver(warm, j);
	if (pid == 0)
		pid = start_process(j->argv, j->env, j->dir, -1, -1);
	if (pid < 0) {
		res.error = err_text;
		goto send;
	}
	res.flags |= RESULT_STARTED;
	uint64_t deadline = start + j->timeout_ns;
	if (deadline < start)
		deadline = UINT64_MAX;
	int status = 0;
	int reaped = reap_until(pid, deadline, &status);
	if (reaped == 0) {
		res.flags |= RESULT_TIMED_OUT;
		kill(-1, SIGKILL);
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
		}
	} else if (reaped < 0) {
		res.error = "init lost track of the program";
		goto send;
	}
	res.duration_ns = now_ns() - start;
	// Whatever the program left behind (daemons, stray children) dies now,
	// before return files are read, so nothing can change them under us.
	kill(-1, SIGKILL);
	reap_all();
	if (WIFSIGNALED(status)) {
		res.signal = WTERMSIG(status);
		res.exit_code = 128 + res.signal;
	} else {
		res.exit_code = WEXITSTATUS(status);
	}

	collect_return_files(&res, j);

send:
	send_result(&res);
}

// collect_return_files adds j's return files to res, within the job's
// budget, a note for each one that is not returned.
void collect_return_files(struct result *res, const struct job *j) {
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
			result_add_note(res, note);
			continue;
		}
		budget -= len;
		result_add_file(res, j->return_files[i], data, len);
		free(data);
	}
	if (root >= 0)
		close(root);
}
