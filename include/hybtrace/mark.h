/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User marks: a program's own events, cheap enough for a hot path, that
 * hybtrace reads out of the process when it dumps and shows next to what
 * the kernel saw.
 *
 *	#include <hybtrace/mark.h>
 *
 *	hybtrace_mark_name(1, "order received");   (once, optional)
 *	...
 *	hybtrace_mark(1, order_id, price);         (anywhere, any thread)
 *
 * A mark is one 32-byte record (TSC, id, sequence, two payload words)
 * written with plain stores into the calling thread's own ring: no lock,
 * no syscall, no atomic, no shared cache line. A thread's first mark maps
 * its ring (once) and enters it in the registry below; a reader gets the
 * last HYBTRACE_MARK_RING_RECORDS - 1 marks of a thread (the oldest slot
 * may be under rewrite). Rings are never freed (a ring whose
 * thread exited may be taken by a new thread when the registry is full).
 *
 * hybtrace finds the registry by its symbol, hybtrace_mark_registry (or,
 * in a stripped program, by its section, hybtrace_marks), and reads the
 * rings with process_vm_readv. The layout is an ABI: change it only with
 * HYBTRACE_MARK_VERSION.
 *
 * Header-only: nothing to link. Every definition is weak, so any number
 * of files may include this header; define the HYBTRACE_MARK_* sizes the
 * same way for all of them (or not at all). x86-64 (TSC); elsewhere the
 * marks take CLOCK_MONOTONIC.
 */
#ifndef HYBTRACE_MARK_H
#define HYBTRACE_MARK_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HYBTRACE_MARK_MAGIC   0x31534b52414d5448ULL /* "HTMARKS1" */
#define HYBTRACE_MARK_VERSION 1

/* What a record's tsc field counts. */
#define HYBTRACE_MARK_CLOCK_TSC	      1 /* x86 rdtsc */
#define HYBTRACE_MARK_CLOCK_MONOTONIC 2 /* CLOCK_MONOTONIC ns */

/* Records per thread: a power of two. 4096 x 32 bytes = 128 KiB a thread. */
#ifndef HYBTRACE_MARK_RING_RECORDS
#define HYBTRACE_MARK_RING_RECORDS 4096
#endif
/* Threads with a ring at once. */
#ifndef HYBTRACE_MARK_MAX_THREADS
#define HYBTRACE_MARK_MAX_THREADS 1024
#endif
/* Names given with hybtrace_mark_name(). */
#ifndef HYBTRACE_MARK_MAX_NAMES
#define HYBTRACE_MARK_MAX_NAMES 256
#endif
#define HYBTRACE_MARK_NAME_LEN 56 /* with its NUL */

struct hybtrace_mark_record {
	uint64_t tsc;
	uint32_t id;
	uint32_t seq; /* the record's index, low 32 bits: a reader tells old records from new */
	uint64_t a;
	uint64_t b;
};

/* A thread's ring: this header (one cache line, the writer's alone), then the records. */
struct hybtrace_mark_ring {
	uint64_t head; /* records written so far; record I is rec[I & mask] */
	uint64_t mask; /* capacity - 1 */
	uint32_t capacity;
	uint32_t tid;
	uint64_t reserved[5];
	struct hybtrace_mark_record rec[];
};

struct hybtrace_mark_slot {
	uint64_t ring;	   /* address of its struct hybtrace_mark_ring */
	uint64_t head;	   /* address of the ring's head */
	uint64_t start;	   /* the first record of this thread (a ring taken over from another) */
	uint32_t tid;	   /* 0 while it is being filled in */
	uint32_t capacity; /* records */
};

struct hybtrace_mark_name {
	uint32_t id;
	uint32_t len; /* without the NUL */
	char name[HYBTRACE_MARK_NAME_LEN];
};

struct hybtrace_mark_registry {
	uint64_t magic;
	uint32_t version;
	uint32_t size;	      /* sizeof(struct hybtrace_mark_registry) */
	uint32_t clock;	      /* HYBTRACE_MARK_CLOCK_* */
	uint32_t record_size; /* sizeof(struct hybtrace_mark_record) */
	uint32_t ring_header; /* offsetof(struct hybtrace_mark_ring, rec) */
	uint32_t slot_size;   /* sizeof(struct hybtrace_mark_slot) */
	uint32_t slot_capacity;
	uint32_t slot_count; /* slots handed out; each is published before the count */
	uint32_t name_size;  /* sizeof(struct hybtrace_mark_name) */
	uint32_t name_capacity;
	uint32_t name_count;
	uint32_t lock; /* registration only: never taken by a mark */
	/* Arrays mapped on first use, so a file that includes this header costs no .bss. */
	union {
		struct hybtrace_mark_slot *ptr;
		uint64_t addr;
	} slots;
	union {
		struct hybtrace_mark_name *ptr;
		uint64_t addr;
	} names;
	uint64_t dropped_threads; /* threads that found no slot: their marks went nowhere */
	uint32_t atfork_set;
	uint32_t forks;
};

#if defined(__x86_64__) || defined(__i386__)
#define HYBTRACE_MARK_CLOCK_ HYBTRACE_MARK_CLOCK_TSC
static inline __attribute__((always_inline)) uint64_t hybtrace_mark_clock_(void)
{
	return __builtin_ia32_rdtsc();
}
#else
#define HYBTRACE_MARK_CLOCK_ HYBTRACE_MARK_CLOCK_MONOTONIC
static inline __attribute__((always_inline)) uint64_t hybtrace_mark_clock_(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}
#endif

__attribute__((weak, used, aligned(64),
	       section("hybtrace_marks"))) struct hybtrace_mark_registry hybtrace_mark_registry = {
	HYBTRACE_MARK_MAGIC,
	HYBTRACE_MARK_VERSION,
	sizeof(struct hybtrace_mark_registry),
	HYBTRACE_MARK_CLOCK_,
	sizeof(struct hybtrace_mark_record),
	sizeof(struct hybtrace_mark_ring),
	sizeof(struct hybtrace_mark_slot),
	HYBTRACE_MARK_MAX_THREADS,
	0,
	sizeof(struct hybtrace_mark_name),
	HYBTRACE_MARK_MAX_NAMES,
	0,
	0,
	{0},
	{0},
	0,
	0,
	0,
};

/* The calling thread's ring; NULL until its first mark. */
__attribute__((weak,
	       tls_model("initial-exec"))) __thread struct hybtrace_mark_ring *hybtrace_mark_tls;

/* Where the marks of a thread that found no ring go: written, never read. */
__attribute__((
	weak,
	aligned(64))) unsigned char hybtrace_mark_sink[sizeof(struct hybtrace_mark_ring) +
						       16 * sizeof(struct hybtrace_mark_record)];

static inline void hybtrace_mark_lock_(struct hybtrace_mark_registry *reg)
{
	while (__atomic_exchange_n(&reg->lock, 1, __ATOMIC_ACQUIRE))
		sched_yield();
}

static inline void hybtrace_mark_unlock_(struct hybtrace_mark_registry *reg)
{
	__atomic_store_n(&reg->lock, 0, __ATOMIC_RELEASE);
}

static inline void *hybtrace_mark_map_(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

/* In a forked child the registry still lists the parent's threads: start it afresh. */
__attribute__((weak, noinline, cold)) void hybtrace_mark_after_fork(void)
{
	struct hybtrace_mark_registry *reg = &hybtrace_mark_registry;

	reg->lock = 0;
	reg->slot_count = 0;
	reg->forks++;
	hybtrace_mark_tls = NULL;
}

/* The slot and name arrays, mapped once. Called with the lock held. */
static inline int hybtrace_mark_arrays_(struct hybtrace_mark_registry *reg)
{
	if (!reg->atfork_set) {
		reg->atfork_set = 1;
		pthread_atfork(NULL, NULL, hybtrace_mark_after_fork);
	}
	if (!reg->slots.ptr)
		reg->slots.ptr = (struct hybtrace_mark_slot *)hybtrace_mark_map_(
			reg->slot_capacity * sizeof(struct hybtrace_mark_slot));
	if (!reg->names.ptr)
		reg->names.ptr = (struct hybtrace_mark_name *)hybtrace_mark_map_(
			reg->name_capacity * sizeof(struct hybtrace_mark_name));
	return reg->slots.ptr && reg->names.ptr ? 0 : -1;
}

static inline int hybtrace_mark_thread_gone_(uint32_t tid)
{
	return syscall(SYS_tgkill, getpid(), (int)tid, 0) == -1 && errno == ESRCH;
}

/* A ring for this thread, in a new slot or in the slot of a thread that exited. Locked. */
static inline struct hybtrace_mark_ring *
hybtrace_mark_take_slot_(struct hybtrace_mark_registry *reg, uint32_t tid)
{
	struct hybtrace_mark_slot *slots = reg->slots.ptr;
	uint32_t n = reg->slot_count, cap = HYBTRACE_MARK_RING_RECORDS;
	struct hybtrace_mark_ring *r;

	if (n < reg->slot_capacity) {
		r = (struct hybtrace_mark_ring *)hybtrace_mark_map_(
			sizeof(*r) + (size_t)cap * sizeof(struct hybtrace_mark_record));
		if (!r)
			return NULL;
		r->mask = cap - 1;
		r->capacity = cap;
		r->tid = tid;
		slots[n].ring = (uint64_t)(uintptr_t)r;
		slots[n].head = (uint64_t)(uintptr_t)&r->head;
		slots[n].start = 0;
		slots[n].capacity = cap;
		__atomic_store_n(&slots[n].tid, tid, __ATOMIC_RELEASE);
		__atomic_store_n(&reg->slot_count, n + 1, __ATOMIC_RELEASE);
		return r;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (!slots[i].tid || !hybtrace_mark_thread_gone_(slots[i].tid))
			continue;
		r = (struct hybtrace_mark_ring *)(uintptr_t)slots[i].ring;
		__atomic_store_n(&slots[i].tid, 0, __ATOMIC_RELEASE);
		slots[i].start = r->head;
		r->tid = tid;
		__atomic_store_n(&slots[i].tid, tid, __ATOMIC_RELEASE);
		return r;
	}
	return NULL;
}

/* A thread's first mark: its ring. Never fails: without one, marks go to the sink. */
__attribute__((weak, noinline, cold)) struct hybtrace_mark_ring *hybtrace_mark_attach(void)
{
	struct hybtrace_mark_registry *reg = &hybtrace_mark_registry;
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	struct hybtrace_mark_ring *r = NULL;

	hybtrace_mark_lock_(reg);
	if (!hybtrace_mark_arrays_(reg))
		r = hybtrace_mark_take_slot_(reg, tid);
	if (!r)
		reg->dropped_threads++;
	hybtrace_mark_unlock_(reg);
	if (!r) {
		r = (struct hybtrace_mark_ring *)(void *)hybtrace_mark_sink;
		r->mask = 15;
	}
	hybtrace_mark_tls = r;
	return r;
}

/*
 * Record event ID with payload A and B in the calling thread's ring. The
 * record is written before the head moves past it (x86 keeps stores in
 * order; the compiler is told to), so a reader that trusts only records
 * below the head never sees a half-written one.
 */
static inline __attribute__((always_inline)) void hybtrace_mark(uint32_t id, uint64_t a, uint64_t b)
{
	struct hybtrace_mark_ring *r = hybtrace_mark_tls;
	struct hybtrace_mark_record *rec;
	uint64_t i;

	if (__builtin_expect(!r, 0))
		r = hybtrace_mark_attach();
	i = r->head;
	rec = &r->rec[i & r->mask];
	rec->tsc = hybtrace_mark_clock_();
	rec->id = id;
	rec->seq = (uint32_t)i;
	rec->a = a;
	rec->b = b;
	__asm__ __volatile__("" ::: "memory");
	r->head = i + 1;
}

/*
 * Name event ID for hybtrace's output (longer names are cut to 55 bytes).
 * Takes the registration lock: call it at startup, not on a hot path.
 * Returns 0, or -1 when the name table is full or cannot be mapped.
 */
__attribute__((weak, noinline)) int hybtrace_mark_name(uint32_t id, const char *name)
{
	struct hybtrace_mark_registry *reg = &hybtrace_mark_registry;
	struct hybtrace_mark_name *e = NULL;
	size_t len = strlen(name);
	int rc = -1;

	if (len >= HYBTRACE_MARK_NAME_LEN)
		len = HYBTRACE_MARK_NAME_LEN - 1;
	hybtrace_mark_lock_(reg);
	if (!hybtrace_mark_arrays_(reg)) {
		for (uint32_t i = 0; i < reg->name_count && !e; i++)
			if (reg->names.ptr[i].id == id)
				e = &reg->names.ptr[i];
		if (!e && reg->name_count < reg->name_capacity)
			e = &reg->names.ptr[reg->name_count];
	}
	if (e) {
		e->id = id;
		memcpy(e->name, name, len);
		e->name[len] = 0;
		e->len = (uint32_t)len;
		if (e == &reg->names.ptr[reg->name_count])
			__atomic_store_n(&reg->name_count, reg->name_count + 1, __ATOMIC_RELEASE);
		rc = 0;
	}
	hybtrace_mark_unlock_(reg);
	return rc;
}

#ifdef __cplusplus
}
#endif

#endif /* HYBTRACE_MARK_H */
