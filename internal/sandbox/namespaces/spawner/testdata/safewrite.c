// safewrite runs the session init's safe writer (session.c) on a
// directory standing in for the sandbox's root, for TestSafeWrite: it
// writes argv[3] to argv[2] below the root argv[1] and prints "ok" or the
// error. Built with c/build.sh's flags, never shipped.
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#include "session.h"
#include "util.h"

int main(int argc, char **argv) {
	if (argc != 4) {
		fprintf(stderr, "usage: safewrite ROOT PATH DATA\n");
		return 2;
	}
	int root = open(argv[1], O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0) {
		perror(argv[1]);
		return 2;
	}
	if (safe_write(root, argv[2], argv[3], strlen(argv[3])) < 0)
		printf("%s\n", err_text);
	else
		printf("ok\n");
	return 0;
}
