// The init's side of a zygote (see zygote.h and docs/zygotes.md): the
// pre-started interpreter handed back to the zygote's interpreter instead
// of executed. The serve loop's entry is zygote_serve.c.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zygote.h"

int zygote_mode;
int zygote_entering;
char *zygote_host_paths[2];

// Weak: the tests link the init's sources without spawn.c.
void spawner_forget(void) __attribute__((weak));

// zygote_entry: see zygote.h.
sigjmp_buf zygote_entry;

// exec_capabilities sets the permitted and effective sets to the bounding
// set, the inheritable one empty: what an execve by root of its user
// namespace (init's uid) gives the new program. lock_down cut only the
// bounding set and relies on the exec for the rest; without one, the
// forked interpreter would keep all of init's capabilities.
static int exec_capabilities(void) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	memset(data, 0, sizeof data);
	for (int c = 0; c < 64; c++) {
		int r = prctl(PR_CAPBSET_READ, c, 0, 0, 0);
		if (r < 0)
			break; // past the kernel's last capability
		if (r == 1)
			data[c / 32].permitted |= 1u << (c % 32);
	}
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	if (syscall(SYS_capset, &hdr, data) < 0)
		return -1;
	return prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
}

void zygote_enter(const char *argv0) {
	if (exec_capabilities() < 0)
		return;
	// start_process placed fds 0-3; everything above is close-on-exec
	// (init's status pipe, the job's control pipe's write end, the report
	// pipe): an exec would have closed them, and the report pipe's EOF is
	// what tells init the interpreter runs.
	if (syscall(SYS_close_range, 4, ~0U, 0) < 0)
		return;
	// A fresh program is dumpable (init is not), and named after itself.
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
		return;
	const char *name = strrchr(argv0, '/');
	prctl(PR_SET_NAME, name ? name + 1 : argv0);
	for (int i = 0; i < 2; i++)
		if (zygote_host_paths[i])
			explicit_bzero(zygote_host_paths[i], strlen(zygote_host_paths[i]));
	if (spawner_forget) // absent only from test programs built without spawn.c
		spawner_forget();
	siglongjmp(zygote_entry, 1);
}

// raise_effective makes the effective set the permitted one.
static int raise_effective(void) {
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	data[0].effective = data[0].permitted;
	data[1].effective = data[1].permitted;
	return (int)syscall(SYS_capset, &hdr, data);
}

int zygote_as_owner(unsigned owner) {
	if (!owner)
		return 0; // root's own namespace: nothing to take
	// A change of the effective uid away from 0 clears the effective set
	// (the permitted one stays: the real and saved uids are 0).
	if (setresuid(-1, owner, -1) < 0 || raise_effective() < 0)
		return -1;
	setfsuid(0); // allowed: 0 is the real uid
	if ((int)setfsuid(-1) != 0) {
		errno = EPERM;
		return -1;
	}
	return 0;
}

void zygote_as_root(int engine_pid) {
	// Back to 0 raises the effective set again; a changed effective uid
	// cleared the parent-death signal.
	if (geteuid() != 0 && (setresuid(-1, 0, -1) < 0 || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != engine_pid))
		_exit(1);
}
