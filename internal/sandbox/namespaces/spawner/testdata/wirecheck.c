// wirecheck runs the C init's own wire code (wire.c) on messages the Go side
// encoded, for TestWireMatchesC: every field the C decoder read is printed
// in one canonical line (strings in hex), for Go to compare with what it
// encoded; and a result built from a job is encoded by the C encoder for Go
// to decode. Built with c/build.sh's flags, never shipped.
//
//   wirecheck setup     reads a setup on fd 3, prints it
//   wirecheck job       reads a job on fd 3, prints it, answers a result on
//                       fd 4 made from it (see below)
//   wirecheck request   reads a session's request on fd 3, prints it (a
//                       job's fields as job does), answers a file message
//                       on fd 4 made from it (see below)
//   wirecheck reply     reads a frame on fd 3 whose body is a kernel's reply
//                       frame, prints the status init takes from it
#define _GNU_SOURCE
#include <stdio.h>
#include <string.h>

#include "util.h"
#include "wire.h"

static void hex(const char *name, const char *s, size_t n) {
	printf("%s=", name);
	for (size_t i = 0; i < n; i++)
		printf("%02x", (unsigned char)s[i]);
	printf("\n");
}

static void str(const char *name, const char *s) { hex(name, s, strlen(s)); }

static void list(const char *name, char **v) {
	int n = 0;
	for (; v[n]; n++) {
		char label[64];
		snprintf(label, sizeof label, "%s[%d]", name, n);
		str(label, v[n]);
	}
	printf("%s#=%d\n", name, n);
}

static int setup(void) {
	struct reader r;
	struct setup s;
	memset(&s, 0, sizeof s);
	if (!read_message(INIT_MAX_SETUP_BYTES, &r)) {
		printf("unread\n");
		return 1;
	}
	int rc = parse_setup(&r, &s);
	if (rc == SETUP_OTHER_VERSION) {
		printf("refused=%s\n", err_text);
		return 0;
	}
	if (rc < 0) {
		printf("malformed\n");
		return 0;
	}
	str("rootfs", s.rootfs);
	str("mount_dir", s.mount_dir);
	printf("writable_bytes=%llu\ntmp_bytes=%llu\nmax_inodes=%llu\n", (unsigned long long)s.writable_bytes,
	       (unsigned long long)s.tmp_bytes, (unsigned long long)s.max_inodes);
	str("hostname", s.hostname);
	printf("maps_groups=%d\njoined_network=%d\nlock_down_early=%d\nprestart=%d\ncopy_home=%d\nsession=%d\n",
	       !!(s.flags & SETUP_MAPS_GROUPS), !!(s.flags & SETUP_JOINED_NETWORK), !!(s.flags & SETUP_LOCK_DOWN_EARLY),
	       !!(s.flags & SETUP_PRESTART), !!(s.flags & SETUP_COPY_HOME), !!(s.flags & SETUP_SESSION));
	list("dns", s.dns);
	list("mask_paths", s.mask_paths);
	list("readonly_paths", s.readonly_paths);
	hex("seccomp", s.seccomp, s.seccomp_len);
	printf("keep_caps=%llu\n", (unsigned long long)s.keep_caps);
	list("prestart_argv", s.prestart_argv);
	list("prestart_env", s.prestart_env);
	str("prestart_dir", s.prestart_dir);
	for (uint32_t i = 0; i < s.setting_count; i++) {
		str("setting", s.setting_names[i]);
		printf("value=%llu\n", (unsigned long long)s.setting_values[i]);
	}
	for (uint32_t i = 0; i < s.rlimit_count; i++)
		printf("rlimit=%llu:%llu\n", (unsigned long long)s.rlimit_resources[i], (unsigned long long)s.rlimit_values[i]);
	return 0;
}

// job prints the job and answers a result made from it: flags from the
// low bits of max_return_bytes, exit code minus argc, signal the number of
// files, duration the timeout, the input files returned, the return file
// names as notes and the directory as the error.
static void print_job(struct job j) {
	list("argv", j.argv);
	list("env", j.env);
	str("dir", j.dir);
	for (uint32_t i = 0; i < j.file_count; i++) {
		str("file", j.file_paths[i]);
		hex("data", j.file_data[i], j.file_lens[i]);
	}
	list("return_files", j.return_files);
	printf("max_return_bytes=%llu\ntimeout_ns=%llu\n", (unsigned long long)j.max_return_bytes,
	       (unsigned long long)j.timeout_ns);
	str("resident_key", j.resident_key);
	list("resident_argv", j.resident_argv);
	list("resident_env", j.resident_env);
	str("resident_dir", j.resident_dir);
	hex("resident_request", j.resident_request, j.resident_request_len);
	printf("resident_interrupt_ns=%llu\n", (unsigned long long)j.resident_interrupt_ns);
}

static int job(void) {
	struct reader r;
	struct job j;
	memset(&j, 0, sizeof j);
	if (!read_message(INIT_MAX_JOB_BYTES, &r)) {
		printf("unread\n");
		return 1;
	}
	if (parse_job(&r, &j) < 0) {
		printf("malformed\n");
		return 0;
	}
	print_job(j);
	struct result res = {
	    .flags = j.max_return_bytes & (RESULT_STARTED | RESULT_TIMED_OUT | RESULT_PROCESS_LIMIT),
	    .exit_code = -(int64_t)j.argc,
	    .signal = j.file_count,
	    .duration_ns = j.timeout_ns,
	    .error = j.dir,
	    .left = j.argc,
	};
	for (uint32_t i = 0; i < j.file_count; i++)
		result_add_file(&res, j.file_paths[i], j.file_data[i], j.file_lens[i]);
	for (char **n = j.return_files; *n; n++)
		result_add_note(&res, *n);
	return send_result(&res) < 0;
}

// request prints the request and answers a file message: the write's
// data (or the read's path) as data, the path as the error.
static int request(void) {
	struct reader r;
	struct request q;
	memset(&q, 0, sizeof q);
	if (!read_message(INIT_MAX_JOB_BYTES, &r)) {
		printf("unread\n");
		return 1;
	}
	if (parse_request(&r, &q) < 0) {
		printf("malformed\n");
		return 0;
	}
	printf("kind=%llu\n", (unsigned long long)q.kind);
	if (q.kind == REQUEST_JOB)
		print_job(q.job);
	if (q.kind == REQUEST_FILE_READ || q.kind == REQUEST_FILE_WRITE) {
		str("path", q.path);
		printf("max=%llu\n", (unsigned long long)q.max);
		hex("data", q.data ? q.data : "", q.data_len);
	}
	if (q.kind == REQUEST_FILE_WRITE)
		return send_file(q.data, q.data_len, q.path) < 0;
	return send_file(q.path ? q.path : "", q.path ? strlen(q.path) : 0, q.path) < 0;
}

// reply parses the frame's body as a kernel's whole reply frame (length
// included) and prints its status, or malformed.
static int reply(void) {
	struct reader r;
	if (!read_message(INIT_MAX_JOB_BYTES, &r)) {
		printf("unread\n");
		return 1;
	}
	int status;
	if (parse_kernel_reply(r.p, (size_t)(r.end - r.p), &status) < 0)
		printf("malformed\n");
	else
		printf("status=%d\n", status);
	return 0;
}

int main(int argc, char **argv) {
	if (argc == 2 && !strcmp(argv[1], "setup"))
		return setup();
	if (argc == 2 && !strcmp(argv[1], "job"))
		return job();
	if (argc == 2 && !strcmp(argv[1], "request"))
		return request();
	if (argc == 2 && !strcmp(argv[1], "reply"))
		return reply();
	fprintf(stderr, "usage: wirecheck setup|job|request|reply\n");
	return 2;
}
