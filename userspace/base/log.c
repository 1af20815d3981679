// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/log.h"

static __thread char last_error[512];

int ht_fail(const char *fmt, ...)
{
	char message[sizeof(last_error)];
	int saved_errno = errno; /* callers may still look at it */
	va_list ap;

	/* Format apart: callers often wrap the previous message, ht_last_error(). */
	va_start(ap, fmt);
	vsnprintf(message, sizeof(message), fmt, ap);
	va_end(ap);
	memcpy(last_error, message, sizeof(last_error));
	errno = saved_errno;
	return -1;
}

const char *ht_last_error(void)
{
	return last_error;
}

void ht_error(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "hybtrace: %s\n", line);
}

void ht_warn(const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "hybtrace: warning: %s\n", line);
}
