// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "base/log.h"

static __thread char last_error[512];
static __thread FILE *log_stream; /* NULL: stderr */

void ht_log_to(FILE *f)
{
	log_stream = f;
}

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

/* One line on this thread's stream: "hybtrace: ", KIND, the message. */
static void say(const char *kind, const char *fmt, va_list ap)
{
	char line[1024];

	vsnprintf(line, sizeof(line), fmt, ap);
	fprintf(log_stream ? log_stream : stderr, "hybtrace: %s%s\n", kind, line);
}

void ht_error(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("", fmt, ap);
	va_end(ap);
}

void ht_note(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("", fmt, ap);
	va_end(ap);
}

void ht_warn(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	say("warning: ", fmt, ap);
	va_end(ap);
}
