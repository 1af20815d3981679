// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Test only, linked into the tests that use it: see trace_fixtures.h. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "trace_fixtures.h"

int fx_add_track(struct timeline *tl, enum tl_track_kind kind, const char *name, uint64_t parent,
		 int32_t pid, int32_t tid, int32_t cpu)
{
	return tl_add_track(tl, &(struct tl_track_desc){
					.kind = kind,
					.name = name,
					.parent_uuid = parent,
					.pid = pid,
					.tid = tid,
					.cpu = cpu,
				});
}

uint64_t fx_uuid_of(const struct timeline *tl, int track)
{
	return tl_track(tl, track)->uuid;
}

struct timeline *fx_make_rich(void)
{
	struct timeline *tl = tl_new();
	int proc = fx_add_track(tl, TL_TRACK_PROCESS, "demo", 0, 100, 0, 0);
	int main_thr = fx_add_track(tl, TL_TRACK_THREAD, "main", fx_uuid_of(tl, proc), 100, 100, 0);
	int worker = fx_add_track(tl, TL_TRACK_THREAD, "worker", fx_uuid_of(tl, proc), 100, 102, 0);
	int main_k = fx_add_track(tl, TL_TRACK_THREAD_KERNEL, "main (kernel)",
				  fx_uuid_of(tl, main_thr), 0, 0, 0);
	int worker_k = fx_add_track(tl, TL_TRACK_THREAD_KERNEL, "worker (kernel)",
				    fx_uuid_of(tl, worker), 0, 0, 0);
	int cpu0 = fx_add_track(tl, TL_TRACK_CPU, "CPU 0", 0, 0, 0, 0);
	int cpu3 = fx_add_track(tl, TL_TRACK_CPU, "CPU 3", fx_uuid_of(tl, proc), 0, 0, 3);
	int glob = fx_add_track(tl, TL_TRACK_GLOBAL, "triggers", 0, 0, 0, 0);
	struct tl_frame_desc frames[64];
	long ev;

	tl_meta_set(tl, "hybtrace_version", "0.1.0");
	tl_meta_set(tl, "kernel", "Linux 6.1.0-18-amd64");
	tl_meta_set(tl, "cpu_model", "AMD EPYC 7B13");
	tl_meta_set(tl, "cmdline", "hybtrace --pid 100 -o \"out file\"");
	tl_meta_set(tl, "wall_clock", "2024-05-01T12:00:00Z");
	tl_meta_set(tl, "loss.flight_recorder_overwritten", "0");
	tl_set_clock_snapshot(tl, &(struct tl_clock_snapshot){
					  .boottime_ns = 5000000123ull,
					  .monotonic_ns = 4000000456ull,
					  .realtime_ns = 1714564800000000789ull,
				  });

	/* 64 levels, each with the call stack that got there (root first). */
	for (int i = 0; i < 64; i++) {
		char name[16], fn[16];

		snprintf(name, sizeof(name), "f%d", i);
		snprintf(fn, sizeof(fn), "fn_%d", i);
		frames[i] = (struct tl_frame_desc){NULL, i % 3 ? "/usr/bin/demo" : NULL,
						   0x401000 + 16 * (uint64_t)i};
		frames[i].function = i % 5 == 4 ? NULL : strdup(fn);
		ev = tl_add_slice(tl, main_thr, 1000 + 10 * (uint64_t)i, 10000 - 20 * (uint64_t)i,
				  name, i % 2 ? "user" : NULL);
		tl_event_arg_uint(tl, ev, "depth", (uint64_t)i);
		tl_event_callstack(tl, ev, frames, (size_t)i + 1);
	}
	for (int i = 0; i < 64; i++)
		free((char *)frames[i].function);

	/* Siblings that touch, a zero-length slice, instants on the edges. */
	tl_add_slice(tl, worker, 2000, 500, "a", "user");
	tl_add_slice(tl, worker, 2500, 500, "b", "user");
	tl_add_slice(tl, worker, 2600, 400, "b.tail", "user");
	tl_add_slice(tl, worker, 3000, 0, "zero", NULL);
	tl_add_instant(tl, worker, 2500, "edge", NULL);
	tl_add_instant(tl, worker, 3000, "end edge", NULL);
	tl_add_slice(tl, worker, 4000, 10, NULL, NULL);

	/* Every argument kind, extreme values included. */
	ev = tl_add_instant(tl, glob, 1500, "breach", "trigger");
	tl_event_arg_int(tl, ev, "negative", -42);
	tl_event_arg_int(tl, ev, "min", INT64_MIN);
	tl_event_arg_uint(tl, ev, "max", UINT64_MAX);
	tl_event_arg_double(tl, ev, "nan", NAN);
	tl_event_arg_double(tl, ev, "minus_inf", -INFINITY);
	tl_event_arg_double(tl, ev, "tenth", 0.1);
	tl_event_arg_str(tl, ev, "text", "na\xc3\xafve \"quoted\" \\ tab\t");
	tl_event_arg_str(tl, ev, "empty", "");
	tl_event_arg_int(tl, ev, NULL, 7);

	/* A wakeup: the waker's flow ends at the wakee's run-queue wait; one flow passes through.
	 */
	ev = tl_add_slice(tl, worker_k, 5000, 100, "write", "syscall");
	tl_event_flow_out(tl, ev, 0xfeedfacecafebeefull);
	tl_event_flow_out(tl, ev, 77);
	ev = tl_add_slice(tl, main_k, 5050, 200, "runnable", "sched");
	tl_event_flow_in(tl, ev, 0xfeedfacecafebeefull);
	tl_event_arg_str(tl, ev, "culprit", "kworker/0:1");
	ev = tl_add_instant(tl, main_k, 5300, "switch in", "sched");
	tl_event_flow_out(tl, ev, 77);
	tl_event_flow_in(tl, ev, 78);

	/* It begins a flow that ends on the instant: flows cross tracks both ways. */
	ev = tl_add_slice(tl, cpu0, 5050, 200, "kworker/0:1", NULL);
	tl_event_flow_out(tl, ev, 78);
	tl_add_slice(tl, cpu3, 5000, 100, "worker", NULL);
	return tl;
}

bool fx_same(const struct timeline *a, const struct timeline *b)
{
	char why[512];

	if (b && tl_equal(a, b, why, sizeof(why)))
		return true;
	if (b)
		printf("     differ: %s\n", why);
	return false;
}

double fx_now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char tmp_dir[64];

__attribute__((destructor)) static void remove_tmp_dir(void)
{
	if (tmp_dir[0])
		rmdir(tmp_dir);
}

char *fx_tmp_path(const char *name)
{
	char *dir = tmp_dir;
	char *path;

	if (!dir[0]) {
		snprintf(dir, sizeof(tmp_dir), "/tmp/ht-test-perfetto-XXXXXX");
		if (!mkdtemp(dir))
			return NULL;
	}
	if (asprintf(&path, "%s/%s", dir, name) < 0)
		return NULL;
	return path;
}
