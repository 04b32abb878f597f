// The engine <-> init protocol on the C side: the binary form of package
// initproto's messages (internal/sandbox/initproto/wire.go), read from
// INIT_CONTROL_FD and written to INIT_STATUS_FD. The constants come from
// initproto.h, generated from the Go package; TestWireMatchesC runs
// messages through both sides.
#ifndef SCRATCHRUN_WIRE_H
#define SCRATCHRUN_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "initproto.h"

// reader walks a message body; bad is set by the first field that does not
// fit, after which every read returns zero values.
struct reader {
	const unsigned char *p, *end;
	int bad;
};

// writer builds a message body.
struct writer {
	unsigned char *p;
	size_t len, cap;
};

void put(struct writer *w, const void *data, size_t n);
void put_u32(struct writer *w, uint32_t v);
void put_u64(struct writer *w, uint64_t v);
void put_bytes(struct writer *w, const void *data, size_t n);
void put_str(struct writer *w, const char *s);

// setup is SetupMessage.
struct setup {
	char *rootfs, *mount_dir, *hostname;
	uint64_t writable_bytes, tmp_bytes, max_inodes, flags, keep_caps;
	char **dns, **mask_paths, **readonly_paths;
	uint32_t dns_count;
	char *seccomp;
	size_t seccomp_len;
	char **prestart_argv, **prestart_env, *prestart_dir;
	uint32_t prestart_argc;
	// /proc/sys/user settings and rlimits (initproto.UserNamespaceLimits,
	// KernelRlimits)
	char **setting_names;
	uint64_t *setting_values;
	uint32_t setting_count;
	uint64_t *rlimit_resources, *rlimit_values;
	uint32_t rlimit_count;
};

// job is JobMessage.
struct job {
	char **argv, **env, *dir;
	uint32_t argc, file_count, return_count;
	char **file_paths, **file_data;
	size_t *file_lens;
	char **return_files;
	uint64_t max_return_bytes, timeout_ns;
	// A resident job's (initproto.ResidentJob): its kernel's key (empty for
	// any other job), the kernel's command line, the request frame handed
	// to it as it is, and the grace after its interrupt.
	char *resident_key, **resident_argv, **resident_env, *resident_dir, *resident_request;
	uint32_t resident_argc;
	size_t resident_request_len;
	uint64_t resident_interrupt_ns;
};

// result is ResultMessage, files and notes encoded as they are added.
struct result {
	uint64_t flags; // RESULT_*
	int64_t exit_code, signal;
	uint64_t duration_ns;
	uint64_t left; // a session job's processes still running (ResultMessage.Left)
	struct writer files, notes;
	uint32_t file_count, note_count;
	const char *error;
};

// request is a session's Request: kind REQUEST_*, and the fields of that
// kind (a job's in job).
struct request {
	uint64_t kind;
	struct job job;
	char *path;
	uint64_t max;
	char *data;
	size_t data_len;
};

// Setup parsing fails as malformed, or as a setup of another protocol
// version (err_text then says so).
#define SETUP_MALFORMED (-1)
#define SETUP_OTHER_VERSION (-2)

unsigned char *read_message(uint32_t max, struct reader *r);
int parse_setup(struct reader *r, struct setup *s);
int parse_job(struct reader *r, struct job *j);
int parse_request(struct reader *r, struct request *q);
int parse_kernel_reply(const unsigned char *frame, size_t len, int *status);
int send_file(const void *data, size_t len, const char *error);
void send_ready(const char *error);
void result_add_file(struct result *res, const char *path, const void *data, size_t len);
void result_add_note(struct result *res, const char *note);
int send_result(const struct result *res);

#endif
