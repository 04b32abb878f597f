// A session's resident kernels (see kernel.h).
//
// A kernel runs below a keeper of its own, a child subreaper forked from
// init after the lock-down (so the kernel is confined exactly as a job's
// program is): whatever a cell starts stays among that keeper's
// descendants, so a kernel that must be killed is killed with its whole
// tree, and nothing of another job's. The keeper tells init the kernel's
// pid once it runs, and its end when it ends.
//
// What the kernel says on its fd 4 is untrusted (user code runs in that
// process): init reads no more than one frame of at most
// INIT_MAX_KERNEL_REPLY bytes, and anything but "exit=N\0" loses the
// kernel.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "job.h"
#include "kernel.h"
#include "session.h"
#include "util.h"

// kernel is one running kernel: its keeper and pid, and init's ends of its
// request pipe (its fd 3), its reply pipe (its fd 4) and its keeper's
// report pipe.
struct kernel {
	char *key;
	pid_t keeper, pid;
	int req, rep, report;
};

static struct kernel kernels[INIT_MAX_KERNELS];
static int kernel_count;

// kernels_close_fds closes init's ends of every kernel's pipes: a fork of
// init that is not init (a keeper) must not hold them, or a kernel's fd 3
// would not see init's end, nor could a job reach a kernel's pipes.
void kernels_close_fds(void) {
	for (int i = 0; i < kernel_count; i++) {
		close(kernels[i].req);
		close(kernels[i].rep);
		close(kernels[i].report);
	}
}

// keep_kernel is a kernel keeper's life: its fds 3 and 4 are the kernel's
// pipes; start the kernel on them, report its pid, then its end, and reap
// every descendant until none is left.
static void __attribute__((noreturn)) keep_kernel(const struct job *j, int report) {
	struct keeper_report rep;
	memset(&rep, 0, sizeof rep);
	if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0) {
		fail("make the kernel's keeper a subreaper");
		snprintf(rep.error, sizeof rep.error, "%s", err_text);
		(void)!write_full(report, &rep, sizeof rep);
		_exit(0);
	}
	pid_t pid = start_process(j->resident_argv, j->resident_env, j->resident_dir, 3, 4);
	close(3);
	close(4);
	if (pid < 0) {
		snprintf(rep.error, sizeof rep.error, "%s", err_text);
		(void)!write_full(report, &rep, sizeof rep);
		_exit(0);
	}
	rep.started = 1, rep.pid = pid;
	(void)!write_full(report, &rep, sizeof rep);
	for (;;) {
		int st;
		pid_t got = waitpid(-1, &st, 0);
		if (got == pid) {
			rep.status = st;
			(void)!write_full(report, &rep, sizeof rep);
		} else if (got < 0 && errno != EINTR) {
			_exit(0);
		}
	}
}

// kernel_start starts a kernel for j's key into k (0), or sets err_text
// (-1).
static int kernel_start(struct kernel *k, const struct job *j) {
	int req[2], rep[2], report[2];
	if (pipe2(req, O_CLOEXEC) < 0)
		return fail("start the kernel: pipe");
	if (pipe2(rep, O_CLOEXEC) < 0) {
		close(req[0]), close(req[1]);
		return fail("start the kernel: pipe");
	}
	if (pipe2(report, O_CLOEXEC) < 0) {
		close(req[0]), close(req[1]), close(rep[0]), close(rep[1]);
		return fail("start the kernel: pipe");
	}
	pid_t keeper = fork();
	if (keeper == 0) {
		// The engine's pipes (fds 3 and 4, open in init) become the
		// kernel's: nothing of the protocol stays in a process user code
		// shares a uid with.
		kernels_close_fds();
		close(INIT_UPPER_FD);
		close(req[1]), close(rep[0]), close(report[0]);
		if (dup2(req[0], 3) < 0 || dup2(rep[1], 4) < 0) {
			struct keeper_report r;
			memset(&r, 0, sizeof r);
			fail("start the kernel: its pipes");
			snprintf(r.error, sizeof r.error, "%s", err_text);
			(void)!write_full(report[1], &r, sizeof r);
			_exit(0);
		}
		close(req[0]), close(rep[1]);
		keep_kernel(j, report[1]);
	}
	close(req[0]), close(rep[1]), close(report[1]);
	if (keeper < 0) {
		close(req[1]), close(rep[0]), close(report[0]);
		return fail("start the kernel's keeper");
	}
	struct keeper_report r;
	memset(&r, 0, sizeof r);
	ssize_t got;
	do
		got = read(report[0], &r, sizeof r);
	while (got < 0 && errno == EINTR);
	if (got != (ssize_t)sizeof r || !r.started) {
		if (got == (ssize_t)sizeof r)
			snprintf(err_text, sizeof err_text, "%s", r.error);
		else
			snprintf(err_text, sizeof err_text, "start the kernel: its keeper ended");
		kill(keeper, SIGKILL);
		waitpid(keeper, NULL, 0);
		close(req[1]), close(rep[0]), close(report[0]);
		return -1;
	}
	fcntl(req[1], F_SETFL, O_NONBLOCK);
	fcntl(rep[0], F_SETFL, O_NONBLOCK);
	fcntl(report[0], F_SETFL, O_NONBLOCK);
	*k = (struct kernel){.key = xstrdup(j->resident_key), .keeper = keeper, .pid = r.pid, .req = req[1], .rep = rep[0],
	                     .report = report[0]};
	return 0;
}

// kernel_lose kills the kernel's whole tree and forgets it; 1 when its
// keeper's tree emptied within INIT_SEPARATE_WITHIN_MS (it is then reaped).
// rep gets the kernel's end if its keeper reports it meanwhile.
static int kernel_lose(int proc, struct kernel *k, struct keeper_report *rep, int *reported) {
	kill(k->pid, SIGKILL);
	int separated = separate(proc, k->keeper, k->report, rep, reported);
	if (separated) {
		waitpid(k->keeper, NULL, 0);
	} else {
		kill(k->keeper, SIGKILL); // its orphans are init's now; the session ends
	}
	close(k->req), close(k->rep), close(k->report);
	free(k->key);
	*k = kernels[--kernel_count];
	return separated;
}

static struct kernel *kernel_find(const char *key) {
	for (int i = 0; i < kernel_count; i++)
		if (strcmp(kernels[i].key, key) == 0)
			return &kernels[i];
	return NULL;
}

// kernel_idle reports whether a kernel is as a finished reply left it:
// nothing on its reply pipe (an end of file is its death), no report of its
// end.
static int kernel_idle(const struct kernel *k) {
	struct pollfd p[2] = {{.fd = k->rep, .events = POLLIN}, {.fd = k->report, .events = POLLIN}};
	return poll(p, 2, 0) == 0;
}

// resident_job runs j on its kernel, starting one first when none of its
// key runs (or the one there broke between jobs), and fills res: the
// reply's status, or how the kernel was lost.
void resident_job(int proc, const struct job *j, struct result *res) {
	struct kernel *k = kernel_find(j->resident_key);
	struct keeper_report rep;
	memset(&rep, 0, sizeof rep);
	int reported = 0;
	if (k && !kernel_idle(k)) {
		kernel_lose(proc, k, &rep, &reported);
		result_add_note(res, "The interpreter had ended, or written out of turn, since the last call; a new one was started.");
		k = NULL, reported = 0;
	}
	if (!k) {
		if (kernel_count == INIT_MAX_KERNELS) {
			snprintf(err_text, sizeof err_text, "a session keeps at most %d interpreters", INIT_MAX_KERNELS);
			res->error = err_text;
			return;
		}
		if (kernel_start(&kernels[kernel_count], j) < 0) {
			res->error = err_text;
			return;
		}
		k = &kernels[kernel_count++];
		res->flags |= RESULT_RESIDENT_STARTED;
	}
	res->flags |= RESULT_STARTED;
	uint64_t start = now_ns();
	uint64_t deadline = start + j->timeout_ns;
	if (deadline < start)
		deadline = UINT64_MAX;
	unsigned char reply[4 + INIT_MAX_KERNEL_REPLY];
	size_t got = 0, want = 4, sent = 0;
	int interrupted = 0, lost = 0, status = -1, keeper_gone = 0;
	while (status < 0 && !lost) {
		uint64_t now = now_ns();
		if (now >= deadline) {
			if (interrupted) {
				lost = 1;
				break;
			}
			// The timeout: an interrupt, and the grace to answer it.
			interrupted = 1;
			res->flags |= RESULT_TIMED_OUT;
			kill(k->pid, SIGINT);
			deadline = now + j->resident_interrupt_ns;
			if (deadline < now)
				deadline = UINT64_MAX;
			continue;
		}
		uint64_t left = deadline - now;
		struct timespec wait = {.tv_sec = (time_t)(left / 1000000000u), .tv_nsec = (long)(left % 1000000000u)};
		struct pollfd p[4] = {
		    {.fd = k->rep, .events = POLLIN},
		    {.fd = k->report, .events = POLLIN},
		    {.fd = INIT_CONTROL_FD, .events = POLLIN},
		    {.fd = sent < j->resident_request_len ? k->req : -1, .events = POLLOUT},
		};
		if (ppoll(p, 4, &wait, NULL) < 0)
			continue;
		if (p[3].revents) {
			ssize_t n = write(k->req, j->resident_request + sent, j->resident_request_len - sent);
			if (n > 0)
				sent += (size_t)n;
			else if (n < 0 && errno != EAGAIN && errno != EINTR)
				lost = 1; // it no longer reads its requests
		}
		if (p[0].revents) {
			ssize_t n = read(k->rep, reply + got, want - got);
			if (n > 0) {
				got += (size_t)n;
				if (got == 4) {
					uint32_t body = (uint32_t)reply[0] | (uint32_t)reply[1] << 8 | (uint32_t)reply[2] << 16 |
					                (uint32_t)reply[3] << 24;
					if (body > INIT_MAX_KERNEL_REPLY)
						lost = 1;
					else
						want = 4 + body;
				}
				if (!lost && got == want && want > 4 && parse_kernel_reply(reply, got, &status) < 0)
					lost = 1;
			} else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
				lost = 1;
			}
		}
		if (status < 0 && p[1].revents) {
			// The kernel ended (its keeper reports it) or its keeper did.
			if (read_report(k->report, &rep) > 0)
				reported = 1;
			else
				keeper_gone = 1;
			lost = 1;
		}
		if (status < 0 && !lost && p[2].revents) {
			struct reader r;
			struct request q;
			memset(&q, 0, sizeof q);
			unsigned char *body = read_message(INIT_MAX_JOB_BYTES, &r);
			if (!body || parse_request(&r, &q) < 0 || q.kind != REQUEST_CANCEL)
				end_session();
			free(body);
			deadline = 0; // as the timeout: interrupt, then the grace
		}
	}
	res->duration_ns = now_ns() - start;
	if (status >= 0) {
		res->flags |= RESULT_SEPARATED;
		res->exit_code = status;
		int n = descendants(proc, k->keeper, 0);
		res->left = n > 1 ? (uint64_t)(n - 1) : 0; // the kernel is not left of the job
		return;
	}
	res->flags |= RESULT_RESIDENT_LOST;
	// Without this the caller sees an exit status only (137 for a kernel
	// that broke its frame or was killed), and learns that its variables
	// are gone no sooner than the next call.
	result_add_note(res, "The interpreter was lost in this call (it ended, was killed, or wrote what is not a reply); "
	                     "the next call starts a new one, without the variables and functions defined so far.");
	// A killed keeper's orphans are init's, among the session's: they
	// cannot be told apart any more.
	if (kernel_lose(proc, k, &rep, &reported) && !keeper_gone)
		res->flags |= RESULT_SEPARATED;
	if (keeper_gone)
		result_add_note(res, "The interpreter's keeper process was killed, so its processes could not be told apart from the session's.");
	int st = reported ? rep.status : SIGKILL;
	if (WIFSIGNALED(st)) {
		res->signal = WTERMSIG(st);
		res->exit_code = 128 + res->signal;
	} else {
		res->exit_code = WEXITSTATUS(st);
	}
}
