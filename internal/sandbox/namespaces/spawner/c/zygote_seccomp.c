// The zygote's seccomp filter (see zygote.h and docs/zygotes.md), which the
// launcher installs after no_new_privs, right before it executes the
// interpreter.
//
// A filter is inherited by every process the zygote makes: each sandbox's
// init (which builds the sandbox's root with mount, pivot_root and unshare
// before it installs the engine's own program) and the job's code. So it
// can only refuse what neither the zygote nor an init needs, and what
// sandboxed code is refused anyway (or has no business with); everything
// else is allowed. What it refuses, and why:
//
//   - setuid, setreuid, setresuid, setfsuid to any uid but -1 ("keep"),
//     0..65535 and the owner block the engine gave this zygote; setgid,
//     setregid, setresgid, setfsgid to any gid but -1 and 0..65535;
//     setgroups with a non-empty list. With CAP_SETUID the zygote could
//     otherwise become any host uid: another sandbox's (idmap.SandboxBase
//     and up), another zygote's or sandbox's owner, an image's. 0..65535
//     stay because a sandbox's processes inherit this filter and name their
//     own namespace's ids, which are those (init's setresuid(0, 0, 0), a
//     job's setuid(1000)); to the zygote they are host ids, which its world
//     (its own pid, network and IPC namespaces, a root of the image's /usr
//     and /etc and the named paths) gives little to reach. A sandbox's
//     setgroups is refused by the kernel anyway (its setgroups file says
//     "deny"), and init calls it only with an empty list.
//   - ptrace: the zygote traces nothing; the engine's program refuses it
//     to sandboxes anyway. Not process_vm_readv and process_vm_writev,
//     which sandboxes have (as Docker's do) and a zygote's would lose:
//     they need ptrace access to their target, and the processes the
//     zygote can name are those of its own pid namespace, its pid 1 (not
//     dumpable: refused to a process without CAP_SYS_PTRACE) and its own
//     sandboxes, which it makes and so already holds.
//   - setns: the zygote serves network-none sandboxes only.
//   - the kernel interfaces the engine's program refuses to sandboxes
//     (keyrings, bpf, perf_event_open, userfaultfd, io_uring, modules,
//     kexec, file handles, host administration): nothing here needs them.
//   - any other ABI than x86_64's (x32 included): the process is killed.
//
// Not refused, though the zygote has no use for them, because an init
// needs them: mount and the rest of the mount API, pivot_root, unshare,
// kill(-1) (init's last act in every sandbox). The zygote holds no
// CAP_SYS_ADMIN, so mounts fail for it; and its kill(-1) reaches only its
// own pid namespace, where pid 1 (the launcher's reaper) ignores it and
// the sandboxes' processes, of other uids, refuse it to a process without
// CAP_KILL.
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zygote.h"

#define MAX_INSNS 256
#define NS_IDS 65536u // idmap.Size: the ids of a sandbox's own namespace

struct program {
	struct sock_filter insn[MAX_INSNS];
	int n;
};

static void emit(struct program *p, struct sock_filter f) {
	if (p->n < MAX_INSNS)
		p->insn[p->n] = f;
	p->n++;
}

#define STMT(code, k) ((struct sock_filter)BPF_STMT(code, k))
#define JUMP(code, k, jt, jf) ((struct sock_filter)BPF_JUMP(code, k, jt, jf))
#define RET(v) STMT(BPF_RET | BPF_K, v)
#define DENY RET(SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA))
// An argument's low 32 bits (little-endian): the kernel reads ids as 32-bit.
#define ARG(i) STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[i]))

// deny refuses syscall nr (the accumulator holds the number).
static void deny(struct program *p, long nr) {
	emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, 1));
	emit(p, DENY);
}

// ids allows syscall nr only when each of its nargs id arguments is -1, in
// 0..NS_IDS-1 or in [lo, hi). The body always returns, so a syscall that
// skips it finds its number still in the accumulator.
static void ids(struct program *p, long nr, int nargs, uint32_t lo, uint32_t hi) {
	int body = 5 * nargs + 2;
	emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)body));
	for (int k = 0; k < nargs; k++) {
		int to_deny = 5 * nargs + 1 - (5 * k + 4); // from the block's fourth instruction
		emit(p, ARG(k));
		emit(p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 3, 0));
		emit(p, JUMP(BPF_JMP | BPF_JGE | BPF_K, NS_IDS, 0, 2));
		emit(p, JUMP(BPF_JMP | BPF_JGE | BPF_K, lo, 0, (uint8_t)to_deny));
		emit(p, JUMP(BPF_JMP | BPF_JGE | BPF_K, hi, (uint8_t)(to_deny - 1), 0));
	}
	emit(p, RET(SECCOMP_RET_ALLOW));
	emit(p, DENY);
}

int zygote_seccomp(uint32_t owner_lo, uint32_t owner_count) {
	struct program p = {.n = 0};
	uint32_t owner_hi = owner_lo + owner_count;
	emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)));
	emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0));
	emit(&p, RET(SECCOMP_RET_KILL_PROCESS));
	emit(&p, STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)));
	emit(&p, JUMP(BPF_JMP | BPF_JGE | BPF_K, 0x40000000u, 0, 1)); // __X32_SYSCALL_BIT
	emit(&p, RET(SECCOMP_RET_KILL_PROCESS));
	ids(&p, SYS_setuid, 1, owner_lo, owner_hi);
	ids(&p, SYS_setfsuid, 1, owner_lo, owner_hi);
	ids(&p, SYS_setreuid, 2, owner_lo, owner_hi);
	ids(&p, SYS_setresuid, 3, owner_lo, owner_hi);
	ids(&p, SYS_setgid, 1, 0, 0);
	ids(&p, SYS_setfsgid, 1, 0, 0);
	ids(&p, SYS_setregid, 2, 0, 0);
	ids(&p, SYS_setresgid, 3, 0, 0);
	// setgroups(size, list): an empty list only.
	emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_setgroups, 0, 4));
	emit(&p, ARG(0));
	emit(&p, JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 1));
	emit(&p, RET(SECCOMP_RET_ALLOW));
	emit(&p, DENY);
	static const long denied[] = {
	    SYS_ptrace, SYS_setns,
	    SYS_keyctl, SYS_add_key, SYS_request_key, SYS_bpf, SYS_perf_event_open, SYS_userfaultfd,
	    SYS_io_uring_setup, SYS_io_uring_enter, SYS_io_uring_register,
	    SYS_init_module, SYS_finit_module, SYS_delete_module, SYS_kexec_load, SYS_kexec_file_load,
	    SYS_open_by_handle_at, SYS_name_to_handle_at, SYS_lookup_dcookie, SYS_acct,
	    SYS_swapon, SYS_swapoff, SYS_reboot, SYS_syslog, SYS_quotactl,
	};
	for (size_t k = 0; k < sizeof denied / sizeof *denied; k++)
		deny(&p, denied[k]);
	emit(&p, RET(SECCOMP_RET_ALLOW));
	if (p.n > MAX_INSNS) {
		errno = E2BIG;
		return -1;
	}
	struct sock_fprog prog = {.len = (unsigned short)p.n, .filter = p.insn};
	return (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog);
}
