// SPDX-License-Identifier: GPL-2.0
/*
 * runas UID GID [--rawio] CMD [ARGS...]: run CMD as UID:GID with no
 * supplementary groups and no capabilities, or with CAP_SYS_RAWIO alone
 * (as an ambient capability, so it survives exec). For the permission tests.
 */
#define _GNU_SOURCE
#include <grp.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct d[2];
	int rawio, i = 3;
	uid_t uid;
	gid_t gid;

	if (argc < 4) {
		fprintf(stderr, "usage: runas UID GID [--rawio] CMD [ARGS...]\n");
		return 127;
	}
	uid = atoi(argv[1]);
	gid = atoi(argv[2]);
	rawio = strcmp(argv[3], "--rawio") == 0;
	i += rawio;
	if (i >= argc)
		return 127;
	if (rawio && prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0))
		return perror("PR_SET_KEEPCAPS"), 127;
	if (setgroups(0, NULL) || setgid(gid) || setuid(uid))
		return perror("setuid"), 127;
	if (rawio) {
		memset(d, 0, sizeof(d));
		d[0].permitted = d[0].effective = d[0].inheritable = 1u << CAP_SYS_RAWIO;
		if (syscall(SYS_capset, &h, d))
			return perror("capset"), 127;
		if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_RAWIO, 0, 0))
			return perror("PR_CAP_AMBIENT_RAISE"), 127;
	}
	execvp(argv[i], argv + i);
	perror(argv[i]);
	return 127;
}
