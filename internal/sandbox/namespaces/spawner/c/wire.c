// The engine <-> init protocol on the C side (see wire.h). Every reader
// refuses what does not fit: the engine is trusted, but a field's length is
// never taken on faith.
#define _GNU_SOURCE
#include <endian.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "util.h"
#include "wire.h"

static const unsigned char *take(struct reader *r, uint64_t n) {
	if (r->bad || n > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		return NULL;
	}
	const unsigned char *v = r->p;
	r->p += n;
	return v;
}

static uint32_t get_u32(struct reader *r) {
	const unsigned char *v = take(r, 4);
	uint32_t x = 0;
	if (v)
		memcpy(&x, v, 4);
	return le32toh(x);
}

static uint64_t get_u64(struct reader *r) {
	const unsigned char *v = take(r, 8);
	uint64_t x = 0;
	if (v)
		memcpy(&x, v, 8);
	return le64toh(x);
}

// get_bytes returns a NUL-terminated copy (the NUL not counted in *len).
static char *get_bytes(struct reader *r, size_t *len) {
	uint32_t n = get_u32(r);
	const unsigned char *v = take(r, n);
	char *s = xmalloc((size_t)(v ? n : 0) + 1);
	if (v)
		memcpy(s, v, n);
	s[v ? n : 0] = 0;
	if (len)
		*len = v ? n : 0;
	return s;
}

// get_str is get_bytes for text that becomes a C string: an embedded NUL
// would silently cut it, so it makes the message malformed.
static char *get_str(struct reader *r) {
	size_t n;
	char *s = get_bytes(r, &n);
	if (strlen(s) != n)
		r->bad = 1;
	return s;
}

// MAX_LIST bounds a list (argv, env, paths): far above what the engine
// sends, and it keeps a list of empty strings from costing many times its
// size in memory.
#define MAX_LIST 65536

// get_list returns a NULL-terminated array of strings.
static char **get_list(struct reader *r, uint32_t *count) {
	uint32_t n = get_u32(r);
	// Each entry takes at least its 4-byte length.
	if (n > MAX_LIST || (uint64_t)n * 4 > (uint64_t)(r->end - r->p)) {
		r->bad = 1;
		n = 0;
	}
	char **v = xmalloc(((size_t)n + 1) * sizeof *v);
	for (uint32_t i = 0; i < n; i++)
		v[i] = get_str(r);
	v[n] = NULL;
	if (count)
		*count = n;
	return v;
}

void put(struct writer *w, const void *data, size_t n) {
	if (w->len + n > w->cap) {
		size_t cap = w->cap ? w->cap : 4096;
		while (cap < w->len + n)
			cap *= 2;
		unsigned char *p = realloc(w->p, cap);
		if (!p)
			_exit(1);
		w->p = p, w->cap = cap;
	}
	memcpy(w->p + w->len, data, n);
	w->len += n;
}

void put_u32(struct writer *w, uint32_t v) {
	v = htole32(v);
	put(w, &v, 4);
}

void put_u64(struct writer *w, uint64_t v) {
	v = htole64(v);
	put(w, &v, 8);
}

void put_bytes(struct writer *w, const void *data, size_t n) {
	put_u32(w, (uint32_t)n);
	put(w, data, n);
}

void put_str(struct writer *w, const char *s) { put_bytes(w, s, strlen(s)); }

// read_message reads one frame of at most max bytes; NULL on EOF or error.
unsigned char *read_message(uint32_t max, struct reader *r) {
	uint32_t n;
	if (read_full(INIT_CONTROL_FD, &n, 4) < 0)
		return NULL;
	n = le32toh(n);
	if (n > max)
		return NULL;
	unsigned char *body = xmalloc(n);
	if (read_full(INIT_CONTROL_FD, body, n) < 0) {
		free(body);
		return NULL;
	}
	*r = (struct reader){.p = body, .end = body + n};
	return body;
}

// send_message writes w as one frame.
static int send_message(struct writer *w) {
	uint32_t n = htole32((uint32_t)w->len);
	if (write_full(INIT_STATUS_FD, &n, 4) < 0)
		return -1;
	return write_full(INIT_STATUS_FD, w->p, w->len);
}

// send_ready answers the setup: ready, or error.
void send_ready(const char *error) {
	struct writer w = {0};
	put_u64(&w, error ? 0 : 1);
	put_str(&w, error ? error : "");
	send_message(&w);
	free(w.p);
}

// setting_name_ok accepts a /proc/sys/user file name: lower-case letters
// and underscores only, so it cannot leave that directory.
static int setting_name_ok(const char *name) {
	if (!name[0] || strlen(name) > 64)
		return 0;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || *c == '_'))
			return 0;
	return 1;
}

// parse_setup decodes a setup message into s: 0, SETUP_MALFORMED, or
// SETUP_OTHER_VERSION when the engine speaks another protocol version
// (checked first: nothing after it can be trusted to mean the same).
int parse_setup(struct reader *r, struct setup *s) {
	uint64_t version = get_u64(r);
	if (!r->bad && version != INIT_PROTOCOL_VERSION) {
		snprintf(err_text, sizeof err_text,
		         "the engine speaks init protocol version %llu and this init version %d: "
		         "install scratchrun, scratchrun-init and scratchrun-spawn from one build (scripts/install.sh)",
		         (unsigned long long)version, INIT_PROTOCOL_VERSION);
		return SETUP_OTHER_VERSION;
	}
	s->rootfs = get_str(r);
	s->mount_dir = get_str(r);
	s->writable_bytes = get_u64(r);
	s->tmp_bytes = get_u64(r);
	s->max_inodes = get_u64(r);
	s->hostname = get_str(r);
	s->flags = get_u64(r);
	s->dns = get_list(r, &s->dns_count);
	uint32_t masked, readonly;
	s->mask_paths = get_list(r, &masked);
	s->readonly_paths = get_list(r, &readonly);
	s->seccomp = get_bytes(r, &s->seccomp_len);
	s->keep_caps = get_u64(r);
	s->prestart_argv = get_list(r, &s->prestart_argc);
	s->prestart_env = get_list(r, NULL);
	s->prestart_dir = get_str(r);
	// Each setting takes at least 12 bytes, each rlimit 16.
	s->setting_count = get_u32(r);
	if (s->setting_count > MAX_LIST || (uint64_t)s->setting_count * 12 > (uint64_t)(r->end - r->p))
		return SETUP_MALFORMED;
	s->setting_names = xmalloc(((size_t)s->setting_count + 1) * sizeof(char *));
	s->setting_values = xmalloc(((size_t)s->setting_count + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < s->setting_count; i++) {
		s->setting_names[i] = get_str(r);
		s->setting_values[i] = get_u64(r);
		if (!r->bad && !setting_name_ok(s->setting_names[i]))
			return SETUP_MALFORMED;
	}
	s->rlimit_count = get_u32(r);
	if (s->rlimit_count > MAX_LIST || (uint64_t)s->rlimit_count * 16 > (uint64_t)(r->end - r->p))
		return SETUP_MALFORMED;
	s->rlimit_resources = xmalloc(((size_t)s->rlimit_count + 1) * sizeof(uint64_t));
	s->rlimit_values = xmalloc(((size_t)s->rlimit_count + 1) * sizeof(uint64_t));
	for (uint32_t i = 0; i < s->rlimit_count; i++) {
		s->rlimit_resources[i] = get_u64(r);
		s->rlimit_values[i] = get_u64(r);
		if (s->rlimit_resources[i] >= RLIM_NLIMITS)
			return SETUP_MALFORMED;
	}
	if (r->bad || r->p != r->end)
		return SETUP_MALFORMED;
	if ((s->flags & SETUP_PRESTART) && s->prestart_argc == 0)
		return SETUP_MALFORMED;
	// A session hands no job to a pre-started interpreter.
	if ((s->flags & SETUP_PRESTART) && (s->flags & SETUP_SESSION))
		return SETUP_MALFORMED;
	// An engine that forgot the /proc lists must not get an unmasked /proc.
	if (masked == 0 || readonly == 0)
		return SETUP_MALFORMED;
	return 0;
}

// parse_job decodes a job message into j (0, or -1 when malformed).
int parse_job(struct reader *r, struct job *j) {
	j->argv = get_list(r, &j->argc);
	j->env = get_list(r, NULL);
	j->dir = get_str(r);
	uint32_t n = get_u32(r);
	if ((uint64_t)n * 8 > (uint64_t)(r->end - r->p))
		return -1;
	j->file_count = n;
	j->file_paths = xmalloc(((size_t)n + 1) * sizeof(char *));
	j->file_data = xmalloc(((size_t)n + 1) * sizeof(char *));
	j->file_lens = xmalloc(((size_t)n + 1) * sizeof(size_t));
	for (uint32_t i = 0; i < n; i++) {
		j->file_paths[i] = get_str(r);
		j->file_data[i] = get_bytes(r, &j->file_lens[i]);
	}
	j->return_files = get_list(r, &j->return_count);
	j->max_return_bytes = get_u64(r);
	j->timeout_ns = get_u64(r);
	j->resident_key = get_str(r);
	j->resident_argv = get_list(r, &j->resident_argc);
	uint32_t resident_envc;
	j->resident_env = get_list(r, &resident_envc);
	j->resident_dir = get_str(r);
	j->resident_request = get_bytes(r, &j->resident_request_len);
	j->resident_interrupt_ns = get_u64(r);
	// Go sends these as int64: above INT64_MAX they were negative there.
	if (r->bad || r->p != r->end || j->max_return_bytes > INT64_MAX || j->timeout_ns > INT64_MAX ||
	    j->resident_interrupt_ns > INT64_MAX)
		return -1;
	// A resident job runs its kernel (whose command it must name), any
	// other its argv; resident fields without a key are not a job.
	if (j->resident_key[0] ? j->resident_argc == 0
	                       : j->argc == 0 || j->resident_argc || resident_envc || j->resident_dir[0] ||
	                             j->resident_request_len || j->resident_interrupt_ns)
		return -1;
	return 0;
}

// parse_request decodes a session's request into q (0, or -1 when
// malformed: an unknown kind, bytes its kind has no field for, a read of
// more than INIT_MAX_FILE_READ_BYTES).
int parse_request(struct reader *r, struct request *q) {
	q->kind = get_u64(r);
	if (r->bad)
		return -1;
	switch (q->kind) {
	case REQUEST_JOB:
		return parse_job(r, &q->job);
	case REQUEST_FILE_READ:
		q->path = get_str(r);
		q->max = get_u64(r);
		if (q->max > INIT_MAX_FILE_READ_BYTES)
			return -1;
		break;
	case REQUEST_FILE_WRITE:
		q->path = get_str(r);
		q->data = get_bytes(r, &q->data_len);
		break;
	case REQUEST_CANCEL:
	case REQUEST_END:
		break;
	default:
		return -1;
	}
	return r->bad || r->p != r->end ? -1 : 0;
}

// parse_kernel_reply decodes a whole reply frame (u32 LE length, then
// "exit=N\0", N in 0-255 written as Go's strconv.Itoa writes it): 0 and
// *status, or -1.
int parse_kernel_reply(const unsigned char *frame, size_t len, int *status) {
	if (len < 4)
		return -1;
	uint32_t n = (uint32_t)frame[0] | (uint32_t)frame[1] << 8 | (uint32_t)frame[2] << 16 | (uint32_t)frame[3] << 24;
	if (n > INIT_MAX_KERNEL_REPLY || len != 4 + (size_t)n)
		return -1;
	const char *b = (const char *)frame + 4;
	if (n < 7 || memcmp(b, "exit=", 5) != 0 || b[n - 1] != 0)
		return -1;
	size_t digits = n - 6;
	if (digits > 3 || (digits > 1 && b[5] == '0'))
		return -1;
	int v = 0;
	for (size_t i = 0; i < digits; i++) {
		if (b[5 + i] < '0' || b[5 + i] > '9')
			return -1;
		v = v * 10 + (b[5 + i] - '0');
	}
	if (v > 255)
		return -1;
	*status = v;
	return 0;
}

// send_file answers a file request (FileMessage): the data read, or the
// error that kept it from being done.
int send_file(const void *data, size_t len, const char *error) {
	struct writer w = {0};
	put_u32(&w, (uint32_t)len);
	if (len)
		put(&w, data, len);
	put_str(&w, error ? error : "");
	int rc = send_message(&w);
	free(w.p);
	return rc;
}

// result_add_file adds a return file to res.
void result_add_file(struct result *res, const char *path, const void *data, size_t len) {
	put_str(&res->files, path);
	put_bytes(&res->files, data, len);
	res->file_count++;
}

// result_add_note adds a note to res.
void result_add_note(struct result *res, const char *note) {
	put_str(&res->notes, note);
	res->note_count++;
}

// send_result reports res (ResultMessage).
int send_result(const struct result *res) {
	struct writer w = {0};
	put_u64(&w, res->flags);
	put_u64(&w, (uint64_t)res->exit_code);
	put_u64(&w, (uint64_t)res->signal);
	put_u64(&w, res->duration_ns);
	put_u32(&w, res->file_count);
	if (res->files.len)
		put(&w, res->files.p, res->files.len);
	put_u32(&w, res->note_count);
	if (res->notes.len)
		put(&w, res->notes.p, res->notes.len);
	put_str(&w, res->error ? res->error : "");
	put_u64(&w, res->left);
	int rc = send_message(&w);
	free(w.p);
	return rc;
}
