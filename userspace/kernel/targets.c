// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "base/cgroup.h"
#include "base/log.h"
#include "base/proc.h"
#include "base/partition.h"
#include "kernel/targets.h"

void ht_targets_init(struct ht_targets *t, const struct ht_target_spec *spec)
{
	memset(t, 0, sizeof(*t));
	t->spec = *spec;
}

static void *map_bitmap(int fd, size_t *bytes)
{
	void *p;

	*bytes = (size_t)HT_TARGET_WORDS * sizeof(uint64_t);
	p = mmap(NULL, *bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		*bytes = 0;
		return NULL;
	}
	return p;
}

int ht_targets_map(struct ht_targets *t, int procs_fd, int pinned_fd)
{
	t->procs = map_bitmap(procs_fd, &t->procs_bytes);
	if (!t->procs)
		return ht_fail("cannot map the target set: %s", strerror(errno));
	if (pinned_fd < 0)
		return 0;
	t->pinned = map_bitmap(pinned_fd, &t->pinned_bytes);
	if (!t->pinned)
		return ht_fail("cannot map the pinned targets: %s", strerror(errno));
	return 0;
}

static bool valid_tgid(int tgid)
{
	return tgid > 0 && (unsigned int)tgid < HT_TARGET_PID_LIMIT;
}

/* The programs change words with atomic or/and: so does user space. */
static bool bit_set(uint64_t *map, int tgid)
{
	uint64_t bit = 1ULL << (tgid & 63);

	return !(__atomic_fetch_or(&map[tgid >> 6], bit, __ATOMIC_SEQ_CST) & bit);
}

static void bit_clear(uint64_t *map, int tgid)
{
	__atomic_fetch_and(&map[tgid >> 6], ~(1ULL << (tgid & 63)), __ATOMIC_SEQ_CST);
}

static bool bit_test(const uint64_t *map, int tgid)
{
	return (__atomic_load_n(&map[tgid >> 6], __ATOMIC_RELAXED) >> (tgid & 63)) & 1;
}

/* Where TGID is, or would go, in the sorted list. */
static size_t list_index(const struct ht_targets *t, int tgid)
{
	return HT_PARTITION_POINT(0, t->count, i, t->v[i].tgid < tgid);
}

const struct ht_target_proc *ht_targets_find(const struct ht_targets *t, int tgid)
{
	size_t i = list_index(t, tgid);

	return i < t->count && t->v[i].tgid == tgid ? &t->v[i] : NULL;
}

static int list_add(struct ht_targets *t, int tgid, uint32_t reason, int parent_tgid,
		    const char *comm)
{
	size_t i = list_index(t, tgid);
	struct ht_target_proc *p;

	if (i < t->count && t->v[i].tgid == tgid) {
		/* A pid reused by a new target process before its old one's exit was read. */
		p = &t->v[i];
	} else {
		if (t->count == t->cap) {
			size_t cap = t->cap ? t->cap * 2 : 16;
			struct ht_target_proc *v = realloc(t->v, cap * sizeof(*v));

			if (!v)
				return ht_fail("out of memory for the target list");
			t->v = v;
			t->cap = cap;
		}
		memmove(&t->v[i + 1], &t->v[i], (t->count - i) * sizeof(*t->v));
		t->count++;
		p = &t->v[i];
		t->joined++;
	}
	p->tgid = tgid;
	p->reason = reason;
	p->parent_tgid = parent_tgid;
	snprintf(p->comm, sizeof(p->comm), "%.*s", HT_COMM_LEN, comm ? comm : "");
	return 0;
}

static void list_remove(struct ht_targets *t, int tgid)
{
	size_t i = list_index(t, tgid);

	if (i >= t->count || t->v[i].tgid != tgid)
		return;
	memmove(&t->v[i], &t->v[i + 1], (t->count - i - 1) * sizeof(*t->v));
	t->count--;
	t->left++;
}

int ht_targets_add(struct ht_targets *t, int tgid, uint32_t reason)
{
	char comm[HT_COMM_LEN + 8] = "";

	if (!valid_tgid(tgid))
		return ht_fail("pid %d cannot be a target (pids go up to %u)", tgid,
			       HT_TARGET_PID_LIMIT - 1);
	if ((reason & HT_TARGET_BY_PID) && t->pinned)
		bit_set(t->pinned, tgid);
	bit_set(t->procs, tgid);
	ht_proc_thread_comm(tgid, comm, sizeof(comm));
	return list_add(t, tgid, reason, 0, comm);
}

/* Exited already, or a zombie: its exit may have come before its bit was set. */
static bool process_gone(int tgid)
{
	unsigned long flags;
	char state;

	return ht_proc_stat_state(tgid, &state, &flags) || state == 'Z' || state == 'X';
}

static void take_out(struct ht_targets *t, int tgid)
{
	if (t->pinned)
		bit_clear(t->pinned, tgid);
	bit_clear(t->procs, tgid);
	list_remove(t, tgid);
}

/* A process of the watched cgroup's subtree, as the walk finds it. */
static int seed_cgroup_process(int tgid, void *arg)
{
	struct ht_targets *t = arg;

	/* hybtrace may run in the cgroup it watches: never its own target. */
	if (tgid == t->spec.self_tgid || !valid_tgid(tgid))
		return 0;
	return ht_targets_add(t, tgid, HT_TARGET_BY_CGROUP);
}

int ht_targets_seed(struct ht_targets *t)
{
	const struct ht_target_spec *s = &t->spec;

	if (s->all)
		return 0;
	for (unsigned int i = 0; i < s->ntgids; i++)
		if (ht_targets_add(t, s->tgids[i], HT_TARGET_BY_PID))
			return -1;
	if (s->cgroup_on)
		return ht_cgroup_for_each_process(s->cgroup_path, seed_cgroup_process, t);
	return 0;
}

void ht_targets_check_seeded(struct ht_targets *t)
{
	/* Backwards: take_out() moves the entries after the one it removes. */
	for (size_t i = t->count; i-- > 0;)
		if (process_gone(t->v[i].tgid))
			take_out(t, t->v[i].tgid);
}

int ht_targets_on_event(void *ctx, void *data, size_t size)
{
	struct ht_targets *t = ctx;
	struct ht_target_event e;

	if (size < sizeof(e))
		return 0;
	memcpy(&e, data, sizeof(e));
	switch (e.kind) {
	case HT_TARGET_JOINED:
		if (valid_tgid((int)e.tgid))
			list_add(t, (int)e.tgid, e.reason, (int)e.parent_tgid, e.comm);
		break;
	case HT_TARGET_LEFT:
		list_remove(t, (int)e.tgid);
		if (t->on_left)
			t->on_left(t->on_left_ctx, (int)e.tgid);
		break;
	case HT_TARGET_CGROUP_REMOVED:
		t->cgroup_removed = true;
		break;
	case HT_TARGET_EXEC:
		if (t->on_exec && valid_tgid((int)e.tgid))
			t->on_exec(t->on_exec_ctx, (int)e.tgid);
		break;
	}
	return 0;
}

bool ht_targets_has(const struct ht_targets *t, int tgid)
{
	if (t->spec.all)
		return tgid > 0 && tgid != t->spec.self_tgid;
	return t->procs && valid_tgid(tgid) && bit_test(t->procs, tgid);
}

void ht_targets_resync(struct ht_targets *t, uint64_t drops)
{
	size_t kept = 0;

	if (drops == t->drops_seen || !t->procs)
		return;
	t->drops_seen = drops;
	for (size_t i = 0; i < t->count; i++) {
		if (bit_test(t->procs, t->v[i].tgid))
			t->v[kept++] = t->v[i];
		else
			t->left++;
	}
	t->count = kept;
}

bool ht_targets_done(const struct ht_targets *t, bool run)
{
	if (t->spec.all || run)
		return false;
	if (t->spec.cgroup_on)
		return t->cgroup_removed;
	return t->count == 0;
}

void ht_targets_describe(const struct ht_targets *t, char *buf, size_t len,
			 const char *(*comm_of)(void *ctx, int pid), void *ctx)
{
	const struct ht_target_spec *s = &t->spec;
	size_t at = 0;

#define PUT(...)                                                                                   \
	do {                                                                                       \
		int n_ = snprintf(buf + at, at < len ? len - at : 0, __VA_ARGS__);                 \
		if (n_ > 0)                                                                        \
			at += (size_t)n_;                                                          \
	} while (0)

	if (len)
		buf[0] = '\0';
	if (s->all) {
		PUT("all tasks");
		return;
	}
	if (s->ntgids)
		PUT("pid%s ", s->ntgids > 1 ? "s" : "");
	for (unsigned int i = 0; i < s->ntgids; i++) {
		const char *comm = comm_of ? comm_of(ctx, s->tgids[i]) : NULL;

		PUT("%s%d", i ? ", " : "", s->tgids[i]);
		if (comm && *comm)
			PUT(" (%s)", comm);
	}
	if (s->ntgids && s->children)
		PUT(" and %s children", s->ntgids > 1 ? "their" : "its");
	if (s->cgroup_on)
		PUT("%scgroup %s", s->ntgids ? ", and " : "", s->cgroup_path);
#undef PUT
}

void ht_targets_free(struct ht_targets *t)
{
	if (t->procs)
		munmap(t->procs, t->procs_bytes);
	if (t->pinned)
		munmap(t->pinned, t->pinned_bytes);
	free(t->v);
	t->procs = t->pinned = NULL;
	t->v = NULL;
	t->count = t->cap = 0;
}
