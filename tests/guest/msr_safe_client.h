/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Reading and writing msr-safe's allowlist nodes whole, for the C clients
 * written against msr-safe's documented ABI alone (msr_safe_test,
 * msr_safe_lists_test): they include neither testlib.h nor msrbatch.h.
 */
#ifndef MSR_SAFE_CLIENT_H
#define MSR_SAFE_CLIENT_H

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

/* The whole node into buf (NUL-terminated): its length, or -errno. */
static inline ssize_t read_all(const char *path, char *buf, size_t size)
{
	int fd = open(path, O_RDONLY);
	ssize_t n, len = 0;

	if (fd < 0)
		return -errno;
	while ((n = read(fd, buf + len, size - 1 - len)) > 0)
		len += n;
	if (n < 0)
		len = -errno;
	else
		buf[len] = 0;
	close(fd);
	return len;
}

/* Writes text to path in one write(2): 0 or -errno. */
static inline int write_list(const char *path, const char *text, size_t len)
{
	int fd = open(path, O_WRONLY), r = 0;

	if (fd < 0)
		return -errno;
	if (write(fd, text, len) != (ssize_t)len)
		r = -errno;
	close(fd);
	return r;
}

#endif
