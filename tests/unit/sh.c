// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only, in the tests' library: see sh.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include "sh.h"

int sh(const char *fmt, ...)
{
	char cmd[8192];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	rc = system(cmd);
	if (rc)
		printf("     command failed (%d): %s\n", rc, cmd);
	return rc;
}
