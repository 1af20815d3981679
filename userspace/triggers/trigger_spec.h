/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --trigger SPEC: where in the target's code a hardware breakpoint goes.
 *
 *	send_order		a function, in any module
 *	libc.so.6:malloc	a function in one module (a name of its file)
 *	./feed:0x4011a0		a file virtual address in a module, as nm shows it
 *	feed.c:120		a source line (DWARF), in any module with debug info
 *	./feed:feed.c:120	a source line in one module
 *	.			the stop function hybtrace_trigger (<hybtrace/hybtrace.h>)
 *	libfoo.so:.		the stop function of one module
 *
 * A module is any name of a mapped file: its path, its file name, its
 * DT_SONAME, or a symlink to it (module_names.h); a relative path
 * ("./feed") counts by its file name. Specs are resolved against every
 * mapping of the target, and again whenever its executable mappings change
 * (exec, dlopen): ht_triggers_resolve() is cheap when they did not.
 */
#ifndef HT_TRIGGER_SPEC_H
#define HT_TRIGGER_SPEC_H

#include <stddef.h>
#include <stdint.h>

struct ht_symbolizer;

/* x86 has 4 debug registers per thread: one per trigger. */
#define HT_TRIGGER_MAX		 4
#define HT_TRIGGER_TEXT_MAX	 512
#define HT_TRIGGER_STOP_FUNCTION "hybtrace_trigger"

enum ht_trigger_kind {
	HT_TRIGGER_SYMBOL,
	HT_TRIGGER_ADDRESS,
	HT_TRIGGER_LINE,
	HT_TRIGGER_STOP,
};

struct ht_trigger_spec {
	enum ht_trigger_kind kind;
	char text[HT_TRIGGER_TEXT_MAX];	  /* as given */
	char module[HT_TRIGGER_TEXT_MAX]; /* "" for any module */
	char symbol[HT_TRIGGER_TEXT_MAX]; /* SYMBOL; STOP: hybtrace_trigger */
	char file[HT_TRIGGER_TEXT_MAX];	  /* LINE */
	unsigned int line;		  /* LINE: 1.. */
	uint64_t vaddr;			  /* ADDRESS: file virtual address */
};

/* Parse one spec. Returns 0, or -1 with ht_last_error() saying what is wrong. */
int ht_trigger_spec_parse(const char *text, struct ht_trigger_spec *out);

struct ht_trigger {
	struct ht_trigger_spec spec;
	int resolved;			   /* ADDR holds */
	int ever_resolved;		   /* resolved at some time since the last exec */
	uint64_t addr;			   /* runtime address in the target */
	char module[4096];		   /* the mapping's path it resolved in */
	int changed;			   /* the last resolve moved, armed or lost it */
	char pending[HT_TRIGGER_TEXT_MAX]; /* unresolved and waiting: why ("" otherwise) */
	/* LINE and ADDRESS: the file address found, and the file it is in. */
	uint64_t cached_vaddr;
	uint64_t cached_inode;
	uint32_t cached_dev_major, cached_dev_minor;
	char cached_path[4096];
};

struct ht_triggers {
	struct ht_trigger v[HT_TRIGGER_MAX];
	size_t count;
	/* Fingerprint of the executable mappings last resolved against; 0: never. */
	uint64_t maps_key;
	/* Bumped each time a resolve changes some trigger's address. */
	uint64_t generation;
};

/* Flags of ht_triggers_resolve(). */
enum {
	/*
	 * A function (or module) that is not mapped yet is not an error: the
	 * trigger stays unresolved, with ->pending saying why, until a later
	 * resolve finds it (a library loaded with dlopen).
	 */
	HT_TRIGGERS_WAIT = 1 << 0,
	/* Resolve even if the executable mappings look unchanged. */
	HT_TRIGGERS_FORCE = 1 << 1,
	/*
	 * Only a spec whose module is not mapped yet waits for it (a running
	 * target that loads the library later); a function or line missing from
	 * what is mapped is an error, with suggestions.
	 */
	HT_TRIGGERS_WAIT_MODULES = 1 << 2,
};

void ht_triggers_init(struct ht_triggers *t);

/* Parse SPEC and add it. Returns 0, or -1 (malformed, or a fifth trigger). */
int ht_triggers_add(struct ht_triggers *t, const char *spec);

/*
 * Resolve every trigger against process PID, through S (refreshed here when
 * the target's executable mappings changed; S belongs to the caller's
 * thread). Cheap when the mappings are unchanged: one read of
 * /proc/PID/maps. Returns how many triggers changed (->changed set: arm,
 * move or disarm their breakpoints), or -1 with ht_last_error() naming the
 * first trigger that failed; ->changed is set then too, and the others are
 * resolved as far as they can be. An error is returned once per change of
 * the mappings (HT_TRIGGERS_FORCE asks again).
 */
int ht_triggers_resolve(struct ht_triggers *t, struct ht_symbolizer *s, int pid, unsigned flags);

/*
 * The target exec'd: every resolution named the old image. Forget them all;
 * the next resolve finds each trigger again and reports it changed.
 */
void ht_triggers_reset(struct ht_triggers *t);

/* "send_order at 0x55d0c0a011a0 in /srv/feed" for logs, into BUF. */
const char *ht_trigger_describe(const struct ht_trigger *tr, char *buf, size_t len);

/*
 * Edit distance (optimal string alignment: a swap of two neighbours is one
 * edit) between A and B, up to LIMIT; LIMIT + 1 when larger. Exposed for tests.
 */
unsigned int ht_edit_distance(const char *a, const char *b, unsigned int limit);

#endif /* HT_TRIGGER_SPEC_H */
