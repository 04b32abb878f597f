// wirecheck runs the C init's own wire code (wire.c) on messages the Go side
// encoded, for TestWireMatchesC: every field the C decoder read is printed
// in one canonical line (strings in hex), for Go to compare with what it
// encoded; and a result built from a job is encoded by the C encoder for Go
// to decode. Built with c/build.sh's flags, never shipped.
//
//   wirecheck setup     reads a setup on fd 3, prints it
//   wirecheck job       reads a job on fd 3, prints it, answers a result on
//                       fd 4 made from it (see below)
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
	printf("maps_groups=%d\njoined_network=%d\nlock_down_early=%d\nprestart=%d\ncopy_home=%d\n",
	       !!(s.flags & SETUP_MAPS_GROUPS), !!(s.flags & SETUP_JOINED_NETWORK), !!(s.flags & SETUP_LOCK_DOWN_EARLY),
	       !!(s.flags & SETUP_PRESTART), !!(s.flags & SETUP_COPY_HOME));
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
	struct result res = {
	    .flags = j.max_return_bytes & (RESULT_STARTED | RESULT_TIMED_OUT | RESULT_PROCESS_LIMIT),
	    .exit_code = -(int64_t)j.argc,
	    .signal = j.file_count,
	    .duration_ns = j.timeout_ns,
	    .error = j.dir,
	};
	for (uint32_t i = 0; i < j.file_count; i++)
		result_add_file(&res, j.file_paths[i], j.file_data[i], j.file_lens[i]);
	for (char **n = j.return_files; *n; n++)
		result_add_note(&res, *n);
	return send_result(&res) < 0;
}

int main(int argc, char **argv) {
	if (argc == 2 && !strcmp(argv[1], "setup"))
		return setup();
	if (argc == 2 && !strcmp(argv[1], "job"))
		return job();
	fprintf(stderr, "usage: wirecheck setup|job\n");
	return 2;
}
