// A stand-in for the zygote's interpreter (zygote_test.go): it loads
// scratchrun-zygote.so from next to itself and serves; in a sandbox's
// pre-started process, where serve returns 1, it reads the job from fd 3
// and prints it with what the process holds (capabilities, descriptors,
// name), for the test to compare with what an exec'd program would hold.
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
	char so[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", so, sizeof so - 64);
	if (n <= 0)
		return 2;
	so[n] = 0;
	strcpy(strrchr(so, '/'), "/scratchrun-zygote.so");
	void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return 2;
	int (*serve)(void) = (int (*)(void))dlsym(h, "scratchrun_zygote_serve");
	if (!serve)
		return 2;
	int rc = serve();
	if (rc != 1)
		return rc == 0 ? 0 : 1;
	static char job[1 << 16];
	size_t len = 0;
	ssize_t got;
	while (len < sizeof job - 1 && (got = read(3, job + len, sizeof job - 1 - len)) > 0)
		len += (size_t)got;
	printf("dir=%s path=%s\n", job, job + strlen(job) + 1);
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "Name:", 5) || !strncmp(line, "Cap", 3) || !strncmp(line, "NSpid:", 6))
			fputs(line, stdout);
	if (f)
		fclose(f);
	printf("fds:");
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.' && atoi(e->d_name) != dirfd(d))
			printf("%s,", e->d_name);
	printf("\n");
	return 0;
}
