/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which breaches become dumps, and which dumps are kept. Pure logic: the
 * dumper (dumper.c) feeds it candidates, the time and what the builder did,
 * and carries out what it answers (freeze, write, drop); the unit tests play
 * it with sequences of candidates and times.
 *
 * An interval opens with the first candidate that ended while none was open
 * and lasts --min-interval from that candidate's end. A candidate belongs to
 * the interval its breach ended in, however late the event loop read it. The
 * interval's choice waits until every breach that ended in it has been read:
 * until one that ended after it is offered, or the event loop says it read
 * the ring up to a time past its end (plus the lag of a breach on its way).
 * One that still came after the choice is passed over, so two dumps are
 * never of breaches closer than --min-interval. Its candidates compete:
 * under the `worst` rule the worst (ht_dump_rank_cmp) is its dump, under
 * `first` the first. A candidate
 * is frozen at its own window's end (the rings cover milliseconds, PT's
 * fewer), but only the interval's best so far is held: a worse one is never
 * frozen, a displaced one is dropped at once. When the interval ends its best
 * becomes the choice, which waits for its window's end and for the builder;
 * while a choice waits, the next interval's best may be held too, and that
 * interval goes on until the choice is taken. So at most three captures are
 * held: the dump being written, the choice waiting for it, the interval's
 * best (plus a manual or exit dump's own).
 *
 * Over the session the kept dumps are at most --max-dumps and stop growing
 * once they reach --max-disk; then, under `worst`, a worse candidate replaces
 * the least bad kept dump (its file is removed once the new one is written);
 * under `first` nothing more is dumped. With --max-dumps-per-process, a
 * process (a breach's or a trigger hit's) has at most that many of them: one
 * more of a process at its limit must, under `worst`, be worse than the least
 * bad of that process's, which it replaces; under `first` it is not dumped.
 * The session's limits and the interval still apply to every process alike.
 *
 * Manual and exit dumps are not held to the interval: each is frozen at its
 * own window's end and written next.
 */
#ifndef HT_DUMP_POLICY_H
#define HT_DUMP_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ht_dump_rule {
	HT_DUMP_RULE_WORST = 0, /* the worst of each interval; the worst of the session kept */
	HT_DUMP_RULE_FIRST,	/* the first of each interval, until the limits are reached */
};

struct ht_dump_policy {
	uint64_t min_interval_ns; /* the length of an interval: one dump in each */
	unsigned int max_dumps;	  /* 0: never dump */
	uint64_t max_disk_bytes;  /* all dumps of this session together */
	enum ht_dump_rule rule;
	unsigned int max_dumps_per_process; /* 0: no limit but the session's */
	/*
	 * How long after its end a breach may still be on its way to the event
	 * loop (clock read, then sent); an interval is chosen once the loop has
	 * read that far past its end. 0 in tests that read at once.
	 */
	uint64_t read_lag_ns;
};

/*
 * How bad a dump's moment is. Classes rank first, then the ratio within a
 * class: a thread waiting for new work ranks below every other breach, a
 * code trigger's hit (what the user asked to see) above every breach, and a
 * manual or exit dump above all.
 */
enum ht_dump_rank_class {
	HT_RANK_WAIT_FOR_WORK = 0, /* a thread parked waiting for work (epoll_wait, accept...) */
	HT_RANK_BREACH,
	HT_RANK_TRIGGER,
	HT_RANK_ASKED,
};

struct ht_dump_rank {
	enum ht_dump_rank_class cls;
	double ratio; /* the breach's duration over its threshold; 0 without one */
};

/*
 * A breach's rank: the largest ratio of duration to threshold among the
 * KINDS thresholds it breached (one wait that breaches the off-CPU and the
 * syscall threshold ranks by the one it exceeds most). A threshold of 0 is
 * left out.
 */
struct ht_dump_rank ht_dump_rank_breach(enum ht_dump_rank_class cls, const uint64_t *duration_ns,
					const uint64_t *threshold_ns, size_t kinds);

/* <0, 0 or >0 as A is less bad than, as bad as, or worse than B. */
int ht_dump_rank_cmp(struct ht_dump_rank a, struct ht_dump_rank b);

/* "2.50x its threshold", "a trigger hit", ... for messages. */
const char *ht_dump_rank_format(struct ht_dump_rank r, char *buf, size_t len);

/* What became of a candidate. Indexes the skipped counts. */
enum ht_dump_decision {
	HT_DUMP_NOW,	       /* held: frozen at its window's end, written if it stays the best */
	HT_DUMP_LATER,	       /* a manual dump behind another: frozen when that one is handed on */
	HT_DUMP_SKIP_BUSY,     /* a dump was being written and another was chosen to follow it */
	HT_DUMP_SKIP_INTERVAL, /* another breach of its interval was chosen */
	HT_DUMP_SKIP_COUNT,    /* --max-dumps reached (`worst`: not worse than those kept) */
	HT_DUMP_SKIP_DISK,     /* --max-disk used up (`worst`: not worse than the least bad) */
	/* --max-dumps-per-process reached for its process (`worst`: not worse than its kept) */
	HT_DUMP_SKIP_PROCESS,
	HT_DUMP_DECISIONS,
};

/* "max-dumps reached", ... for messages (RULE says what the limits mean). */
const char *ht_dump_decision_reason(enum ht_dump_decision d, enum ht_dump_rule rule);

/* A candidate the engine holds: the dumper's handle for it, and what decides its fate. */
struct ht_dump_cand {
	bool used;
	bool frozen;
	bool deferred; /* a manual dump that waited for another: its window ended long ago */
	uint64_t id;
	int tgid; /* its process; 0: none (manual, exit) */
	struct ht_dump_rank rank;
	uint64_t window_end_ns;
};

/* A dump of the session, written or being written. */
struct ht_dump_kept {
	uint64_t seq;
	int tgid; /* its process; 0: none */
	struct ht_dump_rank rank;
	bool written;  /* false while the builder writes it */
	bool doomed;   /* a worse dump being written replaces it */
	bool replaces; /* it replaces the dump VICTIM_SEQ once written */
	uint64_t victim_seq;
	uint64_t bytes;
	char *path;	   /* once written */
	char *raw_path;	   /* a raw capture kept beside it (--keep-raw), or NULL */
	uint64_t dev, ino; /* the file written, so that only it is removed */
};

struct ht_dump_stats {
	unsigned int written;  /* files written, replaced ones included */
	unsigned int replaced; /* removed for a worse one */
	unsigned int failed;
	uint64_t bytes; /* of the dumps kept */
	uint64_t skipped[HT_DUMP_DECISIONS];
};

struct ht_dump_engine {
	struct ht_dump_policy p;
	/* The interval's best, the choice waiting for the builder, a manual dump, one behind it. */
	struct ht_dump_cand best, chosen, asked, pending;
	bool interval_open;
	uint64_t interval_end_ns;
	uint64_t read_ns; /* every breach sent before this has been offered */
	bool building;	/* the builder has a dump */
	bool finishing; /* the session ends: each choice is made at once */
	struct ht_dump_kept *kept;
	size_t nkept, kept_cap;
	uint64_t next_seq;
	uint64_t disk_bytes;
	uint64_t not_dumped; /* candidates not dumped since the last dump was handed over */
	struct ht_dump_stats st;
};

void ht_dump_engine_init(struct ht_dump_engine *e, const struct ht_dump_policy *p);
void ht_dump_engine_free(struct ht_dump_engine *e);

struct ht_dump_offer {
	uint64_t id;
	int tgid; /* the process of its breach or trigger hit; 0: none (manual, exit) */
	struct ht_dump_rank rank;
	uint64_t window_end_ns;
	uint64_t ended_ns; /* when its breach ended (CLOCK_MONOTONIC); 0: when offered */
	bool asked;	   /* manual or exit: not held to the interval */
};

struct ht_dump_offer_result {
	enum ht_dump_decision decision; /* of the offered candidate */
	bool dropped;			/* it displaced a candidate held before: */
	uint64_t dropped_id;		/* the dumper frees that one */
	enum ht_dump_decision dropped_reason;
};

/* Offer a candidate at NOW_NS. */
struct ht_dump_offer_result ht_dump_engine_offer(struct ht_dump_engine *e,
						 const struct ht_dump_offer *o, uint64_t now_ns);

enum ht_dump_action_kind {
	HT_DUMP_ACT_NONE,
	HT_DUMP_ACT_FREEZE, /* freeze ID's sources now, then call ht_dump_engine_frozen */
	HT_DUMP_ACT_WRITE,  /* hand ID to the builder, as the session's dump SEQ */
	HT_DUMP_ACT_DROP,   /* ID will not be dumped after all (REASON): free it */
};

struct ht_dump_action {
	enum ht_dump_action_kind what;
	uint64_t id;
	bool deferred; /* FREEZE: a manual dump that waited for another */
	uint64_t seq;  /* WRITE */
	bool replaces; /* WRITE: once written, it replaces the dump VICTIM_SEQ */
	uint64_t victim_seq;
	uint64_t not_dumped;	      /* WRITE: candidates not dumped since the previous one */
	enum ht_dump_decision reason; /* DROP */
};

/*
 * The event loop has read every breach sent before READ_NS: an interval
 * that ended READ_LAG before is complete and its best is chosen.
 */
void ht_dump_engine_read(struct ht_dump_engine *e, uint64_t read_ns);

/* The next thing due at NOW_NS; call again until it answers HT_DUMP_ACT_NONE. */
struct ht_dump_action ht_dump_engine_next(struct ht_dump_engine *e, uint64_t now_ns);

/* The answer to a FREEZE: a candidate whose freeze failed is counted failed and forgotten. */
void ht_dump_engine_frozen(struct ht_dump_engine *e, uint64_t id, bool ok);

/* When ht_dump_engine_next has something to do (CLOCK_MONOTONIC ns); 0: only when the builder
 * is done, or never. */
uint64_t ht_dump_engine_deadline(const struct ht_dump_engine *e);

/* The session ends: intervals no longer wait for their end. */
void ht_dump_engine_finish(struct ht_dump_engine *e);

/* Nothing held and nothing being written. */
bool ht_dump_engine_idle(const struct ht_dump_engine *e);


/*
 * The builder wrote the dump SEQ (OK), at PATH, BYTES long (RAW_PATH beside it or NULL; DEV and
 * INO of the file), or failed. When it replaces a dump, *VICTIM gets a copy of that one's entry
 * (the caller removes its files, then calls ht_dump_engine_removed, and frees the copy's strings
 * with ht_dump_kept_free) and it returns true.
 */
bool ht_dump_engine_written(struct ht_dump_engine *e, uint64_t seq, bool ok, uint64_t bytes,
			    const char *path, const char *raw_path, uint64_t dev, uint64_t ino,
			    struct ht_dump_kept *victim);

/* The replaced dump SEQ is gone from the disk (GONE), or could not be removed. */
void ht_dump_engine_removed(struct ht_dump_engine *e, uint64_t seq, bool gone);

void ht_dump_kept_free(struct ht_dump_kept *k);

#endif /* HT_DUMP_POLICY_H */
