/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One recording session: attach the monitor to a process, serve the event
 * loop (breaches, signals, the status timer, the target's exit), print the
 * summary. `hybtrace record` and `hybtrace run` both end up here.
 */
#ifndef HT_SESSION_H
#define HT_SESSION_H

#include "cli/options.h"

/* Watch o->pid until it exits or a signal stops us. Returns the exit status. */
int ht_session_record(struct ht_options *o);

/* Start o->run_argv held before exec, attach, let it run; returns its exit status. */
int ht_session_run(struct ht_options *o);

#endif /* HT_SESSION_H */
