// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The timeline model: interning, tracks, events, call stacks, nesting, order, equality. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "trace/timeline.h"

static int add_thread(struct timeline *tl, int32_t pid, int32_t tid, const char *name)
{
	return tl_add_track(tl, &(struct tl_track_desc){
					.kind = TL_TRACK_THREAD,
					.pid = pid,
					.tid = tid,
					.name = name,
				});
}

TEST(intern_same_string_same_id)
{
	struct timeline *tl = tl_new();
	tl_str a = tl_intern(tl, "read");
	tl_str b = tl_intern(tl, "write");

	CHECK(a && b && a != b);
	CHECK_EQ_U64(tl_intern(tl, "read"), a);
	CHECK_EQ_U64(tl_intern_n(tl, "read-ahead", 4), a);
	CHECK_EQ_U64(tl_intern(tl, ""), 0);
	CHECK_EQ_U64(tl_intern(tl, NULL), 0);
	CHECK_STR(tl_str_get(tl, a), "read");
	CHECK_STR(tl_str_get(tl, 0), "");
	CHECK_EQ_U64(tl_str_count(tl), 2);
	tl_free(tl);
}

TEST(intern_stops_at_nul)
{
	struct timeline *tl = tl_new();

	CHECK_EQ_U64(tl_intern_n(tl, "ab\0cd", 5), tl_intern(tl, "ab"));
	tl_free(tl);
}

TEST(intern_many_strings_keep_their_text)
{
	struct timeline *tl = tl_new();
	const char *first;
	char buf[32];
	int ok = 1;

	first = tl_str_get(tl, tl_intern(tl, "s0"));
	for (int i = 0; i < 200000; i++) {
		snprintf(buf, sizeof(buf), "s%d", i);
		if (tl_intern(tl, buf) != (tl_str)(i + 1))
			ok = 0;
	}
	CHECK(ok);
	for (int i = 0; i < 200000; i += 997) {
		snprintf(buf, sizeof(buf), "s%d", i);
		if (strcmp(tl_str_get(tl, (tl_str)(i + 1)), buf))
			ok = 0;
	}
	CHECK(ok);
	/* Pointers handed out earlier stay valid: strings never move. */
	CHECK_STR(first, "s0");
	CHECK_EQ_U64(tl_error(tl), 0);
	tl_free(tl);
}

TEST(tracks_kinds_and_parents)
{
	struct timeline *tl = tl_new();
	int proc = tl_add_track(
		tl, &(struct tl_track_desc){
			    .kind = TL_TRACK_PROCESS, .pid = 10, .tid = 99, .name = "demo"});
	int thr, kern, cpu;

	CHECK(proc == 0);
	thr = tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_THREAD,
						       .pid = 10,
						       .tid = 11,
						       .name = "worker",
						       .parent_uuid = tl_track(tl, proc)->uuid});
	kern = tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_THREAD_KERNEL,
							.name = "worker (kernel)",
							.parent_uuid = tl_track(tl, thr)->uuid});
	cpu = tl_add_track(tl, &(struct tl_track_desc){
				       .kind = TL_TRACK_CPU, .cpu = 3, .pid = 7, .name = "CPU 3"});
	CHECK(thr == 1 && kern == 2 && cpu == 3);
	/* Ids a kind does not use are dropped; a kernel track takes its thread's. */
	CHECK_EQ_U64(tl_track(tl, proc)->tid, 0);
	CHECK_EQ_U64(tl_track(tl, kern)->pid, 10);
	CHECK_EQ_U64(tl_track(tl, kern)->tid, 11);
	CHECK_EQ_U64(tl_track(tl, cpu)->pid, 0);
	CHECK_EQ_U64(tl_track(tl, cpu)->cpu, 3);
	CHECK_EQ_U64(tl_track_find(tl, tl_track(tl, kern)->uuid), kern);
	CHECK_EQ_U64(tl_track_find(tl, 12345), (uint64_t)-ENOENT);
	CHECK_STR(tl_str_get(tl, tl_track(tl, thr)->name), "worker");
	CHECK_STR(tl_track_kind_name(tl_track(tl, kern)->kind), "thread_kernel");
	CHECK_EQ_U64(tl_error(tl), 0);
	tl_free(tl);
}

TEST(tracks_refuse_bad_descriptions)
{
	struct timeline *tl = tl_new();
	int thr = add_thread(tl, 1, 1, "t");
	uint64_t uuid = tl_track(tl, thr)->uuid;

	CHECK(tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_GLOBAL, .uuid = uuid}) ==
	      -EEXIST);
	CHECK(tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_CPU,
						       .uuid = TL_HYBTRACE_UUID}) == -EINVAL);
	CHECK(tl_add_track(tl, &(struct tl_track_desc){.parent_uuid = 777}) == -ENOENT);
	CHECK(tl_add_track(tl, &(struct tl_track_desc){.kind = TL_TRACK_THREAD_KERNEL}) == -EINVAL);
	CHECK(tl_add_track(tl, &(struct tl_track_desc){.kind = 99}) == -EINVAL);
	/* The first failure is the one remembered. */
	CHECK(tl_error(tl) == -EEXIST);
	CHECK(strstr(tl_strerror(tl), "uuid") != NULL);
	CHECK_EQ_U64(tl_track_count(tl), 1);
	tl_free(tl);
}

TEST(tracks_picked_uuids_are_unique)
{
	struct timeline *tl = tl_new();
	int a = tl_add_track(tl, &(struct tl_track_desc){.name = "a"});
	/* Take the uuid the next automatic one would get. */
	int b = tl_add_track(tl, &(struct tl_track_desc){.uuid = tl_track(tl, a)->uuid + 1});
	int c = tl_add_track(tl, &(struct tl_track_desc){.name = "c"});

	CHECK(a >= 0 && b >= 0 && c >= 0);
	CHECK(tl_track(tl, c)->uuid != tl_track(tl, b)->uuid);
	CHECK(tl_track(tl, c)->uuid != tl_track(tl, a)->uuid);
	tl_free(tl);
}

TEST(events_and_arguments)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	long ev = tl_add_slice(tl, t, 100, 50, "read", "syscall");
	const struct tl_event *e;
	const struct tl_arg *a;

	CHECK(ev == 0);
	CHECK(!tl_event_arg_int(tl, ev, "fd", -3));
	CHECK(!tl_event_arg_uint(tl, ev, "bytes", UINT64_MAX));
	CHECK(!tl_event_arg_double(tl, ev, "ratio", 0.25));
	CHECK(!tl_event_arg_str(tl, ev, "path", "/etc/passwd"));
	CHECK(!tl_event_flow_out(tl, ev, 7));
	CHECK(!tl_event_flow_in(tl, ev, 8));
	CHECK(!tl_event_flow_in(tl, ev, 9));
	e = tl_event(tl, ev);
	CHECK_EQ_U64(e->ts_ns, 100);
	CHECK_EQ_U64(e->dur_ns, 50);
	CHECK_STR(tl_str_get(tl, e->name), "read");
	CHECK_STR(tl_str_get(tl, e->category), "syscall");
	CHECK_EQ_U64(tl_event_lists(tl, e)->args.count, 4);
	a = tl_arg(tl, tl_event_lists(tl, e)->args.first);
	CHECK(a->kind == TL_ARG_INT && a->i == -3);
	a = tl_arg(tl, a->next);
	CHECK(a->kind == TL_ARG_UINT && a->u == UINT64_MAX);
	a = tl_arg(tl, a->next);
	CHECK(a->kind == TL_ARG_DOUBLE && a->d == 0.25);
	a = tl_arg(tl, a->next);
	CHECK(a->kind == TL_ARG_STR && !strcmp(tl_str_get(tl, a->s), "/etc/passwd"));
	CHECK_EQ_U64(a->next, 0);
	CHECK_EQ_U64(tl_flow(tl, tl_event_lists(tl, e)->flows_out.first)->id, 7);
	CHECK_EQ_U64(tl_event_lists(tl, e)->flows_in.count, 2);
	CHECK_EQ_U64(tl_flow(tl, tl_flow(tl, tl_event_lists(tl, e)->flows_in.first)->next)->id, 9);
	CHECK_EQ_U64(tl_error(tl), 0);
	tl_free(tl);
}

TEST(events_refuse_bad_input)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	long ev = tl_add_instant(tl, t, 10, "mark", NULL);

	CHECK(tl_add_slice(tl, 5, 0, 1, "x", NULL) == -EINVAL);
	CHECK(tl_add_slice(tl, t, UINT64_MAX, 2, "x", NULL) == -ERANGE);
	CHECK(tl_add_event(tl, TL_EVENT_INSTANT, t, 1, 5, 0, 0) == -EINVAL);
	CHECK(tl_slice_end(tl, ev, 20) == -EINVAL);
	for (int i = 0; i < TL_MAX_ARGS; i++)
		CHECK(!tl_event_arg_int(tl, ev, "n", i));
	CHECK(tl_event_arg_int(tl, ev, "n", 99) == -E2BIG);
	for (int i = 0; i < TL_MAX_FLOWS; i++)
		CHECK(!tl_event_flow_out(tl, ev, (uint64_t)i));
	CHECK(tl_event_flow_out(tl, ev, 99) == -E2BIG);
	CHECK(tl_event_arg_int(tl, 12345, "n", 1) == -EINVAL);
	CHECK(tl_error(tl) == -EINVAL);
	tl_free(tl);
}

TEST(events_errors_pass_through_handles)
{
	struct timeline *tl = tl_new();
	long ev = tl_add_slice(tl, 3, 0, 1, "no such track", NULL);

	CHECK(ev == -EINVAL);
	CHECK(tl_event_arg_str(tl, ev, "k", "v") == -EINVAL);
	CHECK(tl_event_flow_out(tl, ev, 1) == -EINVAL);
	CHECK(tl_event_callstack(tl, ev, &(struct tl_frame_desc){"f", NULL, 1}, 1) == -EINVAL);
	CHECK(tl_event_count(tl) == 0);
	CHECK(strstr(tl_strerror(tl), "no such track") != NULL);
	tl_free(tl);
}

TEST(slice_end_sets_duration)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	long ev = tl_add_slice(tl, t, 100, 0, "open", NULL);

	CHECK(!tl_slice_end(tl, ev, 160));
	CHECK_EQ_U64(tl_event(tl, ev)->dur_ns, 60);
	CHECK(tl_slice_end(tl, ev, 99) == -EINVAL);
	tl_free(tl);
}

TEST(callstacks_are_interned_root_first)
{
	struct timeline *tl = tl_new();
	struct tl_frame_desc stack[] = {
		{"main", "/usr/bin/demo", 0x1000},
		{"work", "/usr/bin/demo", 0x1100},
		{"memcpy", "/usr/lib/libc.so.6", 0x22000},
	};
	long a = tl_callstack_intern(tl, stack, 3);
	long b = tl_callstack_intern(tl, stack, 3);
	long c = tl_callstack_intern(tl, stack, 2);
	long none = tl_callstack_intern(tl, stack, 0);

	CHECK(a > 0 && a == b && c > 0 && c != a);
	CHECK_EQ_U64(none, 0);
	CHECK_EQ_U64(tl_callstack_count(tl), 2);
	/* The two stacks share their first two frames. */
	CHECK_EQ_U64(tl_frame_count(tl), 3);
	CHECK_EQ_U64(tl_callstack_depth(tl, (uint32_t)a), 3);
	CHECK_STR(tl_str_get(tl, tl_callstack_frame(tl, (uint32_t)a, 0)->function), "main");
	CHECK_STR(tl_str_get(tl, tl_callstack_frame(tl, (uint32_t)a, 2)->module),
		  "/usr/lib/libc.so.6");
	CHECK_EQ_U64(tl_callstack_frame(tl, (uint32_t)a, 1)->address, 0x1100);
	CHECK(tl_callstack_frame(tl, (uint32_t)a, 3) == NULL);
	tl_free(tl);
}

TEST(callstacks_limit_depth)
{
	static struct tl_frame_desc deep[TL_MAX_FRAMES + 1];
	struct timeline *tl = tl_new();

	for (int i = 0; i <= TL_MAX_FRAMES; i++)
		deep[i] = (struct tl_frame_desc){"f", NULL, (uint64_t)i};
	CHECK(tl_callstack_intern(tl, deep, TL_MAX_FRAMES) > 0);
	CHECK(tl_callstack_intern(tl, deep, TL_MAX_FRAMES + 1) == -E2BIG);
	tl_free(tl);
}

TEST(metadata_keeps_order_and_replaces)
{
	struct timeline *tl = tl_new();

	CHECK(!tl_meta_set(tl, "hybtrace_version", "0.1.0"));
	CHECK(!tl_meta_set(tl, "kernel", "6.1"));
	CHECK(!tl_meta_set(tl, "hybtrace_version", "0.2.0"));
	CHECK(!tl_meta_set(tl, "empty", ""));
	CHECK(tl_meta_set(tl, "", "x") == -EINVAL);
	CHECK_EQ_U64(tl_meta_count(tl), 3);
	CHECK_STR(tl_meta_key(tl, 0), "hybtrace_version");
	CHECK_STR(tl_meta_value(tl, 0), "0.2.0");
	CHECK_STR(tl_meta_key(tl, 1), "kernel");
	CHECK_STR(tl_meta_get(tl, "empty"), "");
	CHECK(tl_meta_get(tl, "missing") == NULL);
	tl_free(tl);
}

TEST(clock_snapshot_now_is_plausible)
{
	struct tl_clock_snapshot snap;
	struct timeline *tl = tl_new();

	CHECK(tl_clock_snapshot(tl) == NULL);
	CHECK(!tl_clock_snapshot_now(&snap));
	/* BOOTTIME also counts suspend, so it is never behind MONOTONIC. */
	CHECK(snap.boottime_ns + 1000000 >= snap.monotonic_ns);
	CHECK(snap.realtime_ns > 1600000000ull * 1000000000ull);
	tl_set_clock_snapshot(tl, &snap);
	CHECK_EQ_U64(tl_clock_snapshot(tl)->realtime_ns, snap.realtime_ns);
	tl_free(tl);
}

TEST(validate_accepts_deep_and_touching_nesting)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	char why[256] = "";

	for (int i = 0; i < 64; i++)
		tl_add_slice(tl, t, 1000 + (uint64_t)i, 1000 - 2 * (uint64_t)i, "level", NULL);
	/* Siblings that touch, a child that ends with its parent, zero-length slices. */
	tl_add_slice(tl, t, 3000, 100, "a", NULL);
	tl_add_slice(tl, t, 3100, 100, "b", NULL);
	tl_add_slice(tl, t, 3150, 50, "b.child", NULL);
	tl_add_slice(tl, t, 3200, 0, "zero", NULL);
	tl_add_slice(tl, t, 3200, 0, "zero", NULL);
	tl_add_instant(tl, t, 3050, "inside a", NULL);
	CHECK(!tl_validate(tl, why, sizeof(why)));
	CHECK_STR(why, "");
	tl_free(tl);
}

TEST(validate_rejects_overlapping_siblings)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "worker");
	int u = add_thread(tl, 1, 3, "other");
	char why[256] = "";

	tl_add_slice(tl, t, 100, 100, "first", NULL);
	tl_add_slice(tl, t, 150, 100, "second", NULL);
	/* The same times on another track are no problem. */
	tl_add_slice(tl, u, 100, 10, "elsewhere", NULL);
	CHECK(tl_validate(tl, why, sizeof(why)) == -EINVAL);
	CHECK(strstr(why, "'second'") != NULL);
	CHECK(strstr(why, "'first'") != NULL);
	CHECK(strstr(why, "worker") != NULL);
	tl_free(tl);
}

TEST(untangle_moves_a_crossing_start_to_the_enclosing_end)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "worker");
	int u = add_thread(tl, 1, 3, "other");
	char why[256] = "";

	/* A syscall, and a run-queue wait whose start was read a little early. */
	tl_add_slice(tl, t, 1000, 500, "clone3", NULL);
	tl_add_slice(tl, t, 1400, 5000, "runqueue", NULL);
	tl_add_slice(tl, t, 1420, 10, "inside", NULL);
	tl_add_slice(tl, u, 1000, 100, "elsewhere", NULL);
	CHECK(tl_validate(tl, why, sizeof(why)) == -EINVAL);
	CHECK_EQ_U64(tl_untangle(tl), 1);
	CHECK(!tl_validate(tl, why, sizeof(why)));
	for (size_t i = 0; i < tl_event_count(tl); i++) {
		const struct tl_event *e = tl_event(tl, i);

		if (!strcmp(tl_str_get(tl, e->name), "runqueue")) {
			CHECK_EQ_U64(e->ts_ns, 1500);
			CHECK_EQ_U64(e->ts_ns + e->dur_ns, 6400);
		}
	}
	/* Nested timelines are left as they are. */
	CHECK_EQ_U64(tl_untangle(tl), 0);
	tl_free(tl);
}

TEST(sort_puts_parents_before_children)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	int u = add_thread(tl, 1, 3, "u");

	tl_add_slice(tl, t, 100, 10, "child", NULL);
	tl_add_instant(tl, u, 5, "elsewhere", NULL);
	tl_add_instant(tl, t, 100, "mark", NULL);
	tl_add_slice(tl, t, 100, 50, "parent", NULL);
	tl_add_slice(tl, t, 50, 10, "early", NULL);
	CHECK(!tl_sort(tl));
	CHECK_STR(tl_str_get(tl, tl_event(tl, 0)->name), "early");
	CHECK_STR(tl_str_get(tl, tl_event(tl, 1)->name), "parent");
	CHECK_STR(tl_str_get(tl, tl_event(tl, 2)->name), "child");
	CHECK_STR(tl_str_get(tl, tl_event(tl, 3)->name), "mark");
	CHECK_STR(tl_str_get(tl, tl_event(tl, 4)->name), "elsewhere");
	tl_free(tl);
}

static const char *name_at(const struct timeline *tl, size_t i)
{
	return tl_str_get(tl, tl_event(tl, i)->name);
}

/*
 * A call stack adds slices as they close: children first. Reordered, they
 * are in start order, a parent before its children even when both span the
 * same time, so the canonical order is the identity and nesting is kept.
 */
TEST(reorder_nested_puts_slices_in_start_order)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	int u = add_thread(tl, 1, 3, "u");
	uint32_t *order;
	char why[128];
	size_t first;

	tl_add_instant(tl, u, 1, "before", NULL);
	first = tl_event_count(tl);
	/* main [0,100) { a [0,30) { leaf [5,10) }  b [40,100) { inner [40,100) { leaf [50,60) } } } */
	tl_add_slice(tl, t, 5, 5, "leaf1", NULL);
	tl_add_slice(tl, t, 0, 30, "a", NULL);
	tl_add_slice(tl, t, 50, 10, "leaf2", NULL);
	tl_add_slice(tl, t, 40, 60, "inner", NULL);
	tl_add_slice(tl, t, 40, 60, "b", NULL);
	tl_add_slice(tl, t, 0, 100, "main", NULL);
	tl_add_slice(tl, t, 100, 5, "next", NULL);
	CHECK(!tl_reorder_nested(tl, first));
	CHECK_STR(name_at(tl, 0), "before");
	CHECK_STR(name_at(tl, 1), "main");
	CHECK_STR(name_at(tl, 2), "a");
	CHECK_STR(name_at(tl, 3), "leaf1");
	CHECK_STR(name_at(tl, 4), "b");
	CHECK_STR(name_at(tl, 5), "inner");
	CHECK_STR(name_at(tl, 6), "leaf2");
	CHECK_STR(name_at(tl, 7), "next");
	CHECK(!tl_validate(tl, why, sizeof(why)));
	order = tl_sorted_order(tl);
	CHECK(order != NULL);
	for (size_t i = 0; order && i < tl_event_count(tl); i++) {
		size_t want = i < 7 ? i + 1 : 0; /* track u's uuid sorts after t's */

		CHECK_EQ_U64(order[i], want);
	}
	free(order);
	/* Events of more than one track, or instants, are left alone. */
	CHECK(!tl_reorder_nested(tl, 0));
	CHECK_STR(name_at(tl, 0), "before");
	tl_free(tl);
}

/* Two timelines built alike, for tl_equal(); VARIANT changes one thing in the second. */
static struct timeline *build(int variant)
{
	struct timeline *tl = tl_new();
	int t = add_thread(tl, 1, 2, "t");
	struct tl_frame_desc stack[] = {{"main", NULL, 1}, {"f", "m", variant == 5 ? 3 : 2}};
	long ev;

	tl_meta_set(tl, "kernel", variant == 1 ? "6.2" : "6.1");
	if (variant != 2)
		tl_set_clock_snapshot(tl, &(struct tl_clock_snapshot){1, 2, 3});
	tl_add_instant(tl, t, 5, "x", NULL);
	ev = tl_add_slice(tl, t, 10, 20, variant == 3 ? "other" : "s", "cat");
	tl_event_arg_double(tl, ev, "d", variant == 4 ? NAN : 1.5);
	tl_event_callstack(tl, ev, stack, 2);
	tl_event_flow_out(tl, ev, variant == 6 ? 43 : 42);
	return tl;
}

TEST(equal_sees_every_difference)
{
	struct timeline *a = build(0), *same = build(0);
	char why[256];

	CHECK(tl_equal(a, same, why, sizeof(why)));
	for (int variant = 1; variant <= 6; variant++) {
		struct timeline *b = build(variant);

		why[0] = '\0';
		CHECK(!tl_equal(a, b, why, sizeof(why)));
		CHECK(why[0] != '\0');
		tl_free(b);
	}
	tl_free(a);
	tl_free(same);
}

TEST(equal_ignores_insertion_order)
{
	struct timeline *a = tl_new(), *b = tl_new();
	int ta = add_thread(a, 1, 2, "t"), tb = add_thread(b, 1, 2, "t");
	char why[256];

	/* Same uuids: both timelines picked the first automatic one. */
	tl_add_slice(a, ta, 10, 5, "one", NULL);
	tl_add_slice(a, ta, 20, 5, "two", NULL);
	tl_add_slice(b, tb, 20, 5, "two", NULL);
	tl_add_slice(b, tb, 10, 5, "one", NULL);
	CHECK(tl_equal(a, b, why, sizeof(why)));
	tl_free(a);
	tl_free(b);
}
