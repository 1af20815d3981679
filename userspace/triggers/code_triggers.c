// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <stdio.h>
#include <string.h>
#include "triggers/code_triggers.h"
#include "base/log.h"
#include "symbols/symbolizer.h"

/* Move every trigger a resolve changed; one that became unresolved is removed. */
static int apply_changes(struct ht_code_triggers *ct, bool all)
{
	char what[HT_TRIGGER_TEXT_MAX + 64];

	for (size_t i = 0; i < ct->specs.count; i++) {
		const struct ht_trigger *tr = &ct->specs.v[i];

		if (!all && !tr->changed)
			continue;
		if (ht_bp_set(&ct->bps, (unsigned int)i, tr->resolved ? tr->addr : 0))
			return -1;
		if (tr->resolved)
			fprintf(stderr, "hybtrace: trigger %s armed\n",
				ht_trigger_describe(tr, what, sizeof(what)));
		else if (tr->pending[0])
			fprintf(stderr, "hybtrace: trigger %s waits: %s\n", tr->spec.text, tr->pending);
	}
	return 0;
}

int ht_code_triggers_open(struct ht_code_triggers *ct, int tgid, char *const *specs, size_t n,
			  bool multi, unsigned int wait)
{
	struct ht_bp_config cfg = { .tgid = tgid, .multi = multi };

	memset(ct, 0, sizeof(*ct));
	ct->tgid = tgid;
	ht_triggers_init(&ct->specs);
	for (size_t i = 0; i < n; i++)
		if (ht_triggers_add(&ct->specs, specs[i]))
			return -1;
	ct->symbolizer = ht_symbolizer_new(tgid);
	if (!ct->symbolizer)
		return -1;
	if (ht_triggers_resolve(&ct->specs, ct->symbolizer, tgid, wait) < 0)
		goto fail;
	if (ht_bp_open(&ct->bps, &cfg))
		goto fail;
	ct->open = true;
	if (apply_changes(ct, true))
		goto fail;
	return 0;
fail:
	ht_code_triggers_close(ct);
	return -1;
}

void ht_code_triggers_close(struct ht_code_triggers *ct)
{
	if (ct->open)
		ht_bp_close(&ct->bps);
	ht_symbolizer_free(ct->symbolizer);
	memset(ct, 0, sizeof(*ct));
}

size_t ht_code_triggers_fds(const struct ht_code_triggers *ct, int *fds, size_t max)
{
	return ct->open ? ht_bp_poll_fds(&ct->bps, fds, max) : 0;
}

/* The target's code changed under the triggers: resolve again, move what moved. */
static void follow_code(struct ht_code_triggers *ct, const struct ht_bp_hits *hits)
{
	unsigned int flags = HT_TRIGGERS_WAIT;

	if (hits->execs) {
		/* A new image: every old address is gone. */
		ht_bp_exec(&ct->bps);
		ht_triggers_reset(&ct->specs);
		flags |= HT_TRIGGERS_FORCE;
	}
	if (ht_triggers_resolve(&ct->specs, ct->symbolizer, ct->tgid, flags) < 0 ||
	    apply_changes(ct, hits->execs != 0))
		ht_warn("triggers: %s", ht_last_error());
}

int ht_code_triggers_drain(struct ht_code_triggers *ct, struct ht_bp_hits *out)
{
	memset(out, 0, sizeof(*out));
	if (!ct->open)
		return 0;
	if (ht_bp_drain(&ct->bps, out))
		return -1;
	if (out->execs || out->mmaps)
		follow_code(ct, out);
	return 0;
}

int ht_code_triggers_finish(struct ht_code_triggers *ct, struct ht_bp_hits *out)
{
	memset(out, 0, sizeof(*out));
	if (!ct->open)
		return 0;
	/* Nothing is resolved again: no hit can come at a new address any more. */
	if (ht_bp_stop(&ct->bps))
		ht_warn("triggers: %s", ht_last_error());
	return ht_bp_drain(&ct->bps, out);
}

void ht_code_triggers_reap(struct ht_code_triggers *ct)
{
	if (ct->open)
		ht_bp_reap(&ct->bps);
}

const char *ht_code_trigger_text(const struct ht_code_triggers *ct, int slot)
{
	if (slot < 0 || (size_t)slot >= ct->specs.count)
		return "?";
	return ct->specs.v[slot].spec.text;
}

size_t ht_code_triggers_count(const struct ht_code_triggers *ct)
{
	return ct->specs.count;
}

const char *ht_code_trigger_unresolved(const struct ht_code_triggers *ct, size_t slot)
{
	const struct ht_trigger *tr;
	char prefix[HT_TRIGGER_TEXT_MAX + 16];
	size_t n;

	if (slot >= ct->specs.count || ct->specs.v[slot].ever_resolved)
		return NULL;
	tr = &ct->specs.v[slot];
	/* The reason names the spec already: the summary puts it first. */
	n = (size_t)snprintf(prefix, sizeof(prefix), "trigger '%s': ", tr->spec.text);
	if (n < sizeof(prefix) && !strncmp(tr->pending, prefix, n))
		return tr->pending + n;
	return tr->pending;
}
