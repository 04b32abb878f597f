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
// dynamic loading and no runtime. The Go init (package goinit) remains for
// gVisor sandboxes, which run it inside runsc.
//
// This file is the order of the steps; each step has a file of its own:
// wire.c (the engine's messages, in the binary form of package initproto,
// malformed ones refused), rootfs.c (mounts and pivot_root), home.c (an
// ordinary user's home), confine.c (limits, capabilities, seccomp) and
// job.c (running and reaping the job, return files), session.c (a
// session's jobs one after another, and its file reads and writes) and
// kernel.c (a session's resident interpreters). Nothing here trusts
// what user code left behind, and nothing reaches a host path after
// pivot_root.
#define _GNU_SOURCE
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "confine.h"
#include "init.h"
#include "job.h"
#include "rootfs.h"
#include "session.h"
#include "util.h"
#include "wire.h"

void sandbox_init(void) {
	// The engine's pipes must not reach user code.
	fcntl(INIT_CONTROL_FD, F_SETFD, FD_CLOEXEC);
	fcntl(INIT_STATUS_FD, F_SETFD, FD_CLOEXEC);
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
	unsigned char *setup_body = read_message(INIT_MAX_SETUP_BYTES, &r);
	if (!setup_body)
		_exit(1);
	int setup_parsed = parse_setup(&r, &s);
	// A zygote's job is a fork of this process: leave it no copy of the
	// raw message (what it needs was parsed into s).
	explicit_bzero(setup_body, (size_t)(r.end - setup_body));
	free(setup_body);
	if (setup_parsed == SETUP_OTHER_VERSION) {
		send_ready(err_text);
		_exit(1);
	}
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
	if (s.flags & SETUP_SESSION)
		run_session(&s); // does not return

	struct job j;
	memset(&j, 0, sizeof j);
	unsigned char *body = read_message(INIT_MAX_JOB_BYTES, &r);
	if (!body)
		_exit(0); // the engine went away or destroyed us unused
	close(INIT_CONTROL_FD);
	int parsed = parse_job(&r, &j);
	free(body); // the job's fields are copies: input files stay in memory once
	if (parsed < 0 || j.resident_key[0]) { // a kernel is a session's
		struct result res = {.error = "malformed job message"};
		send_result(&res);
		_exit(1);
	}
	run_job(&s, &j, &warm);
	_exit(0);
}
