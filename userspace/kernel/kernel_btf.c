// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <bpf/btf.h>
#include "kernel/kernel_btf.h"
#include "base/log.h"

struct btf *ht_btf_open(const char *path)
{
	const char *p = path ? path : HT_DEFAULT_BTF_PATH;
	struct btf *btf;

	if (access(p, R_OK)) {
		ht_fail("cannot read kernel BTF %s (%s): hybtrace needs a kernel built with "
			"CONFIG_DEBUG_INFO_BTF=y, or --btf PATH to a BTF file for this kernel",
			p, strerror(errno));
		return NULL;
	}
	btf = btf__parse(p, NULL);
	if (!btf) {
		ht_fail("%s is not a BTF file: give the BTF of this kernel, as a kernel built "
			"with CONFIG_DEBUG_INFO_BTF=y provides at " HT_DEFAULT_BTF_PATH, p);
		return NULL;
	}
	return btf;
}

/* The function prototype behind typedef btf_trace_NAME, or NULL. */
static const struct btf_type *tracepoint_proto(const struct btf *btf, const char *name)
{
	char typedef_name[128];
	const struct btf_type *t;
	int id;

	snprintf(typedef_name, sizeof(typedef_name), "btf_trace_%s", name);
	id = btf__find_by_name_kind(btf, typedef_name, BTF_KIND_TYPEDEF);
	if (id < 0)
		return NULL;
	t = btf__type_by_id(btf, id);
	if (!t)
		return NULL;
	t = btf__type_by_id(btf, t->type); /* pointer */
	if (!t || !btf_is_ptr(t))
		return NULL;
	t = btf__type_by_id(btf, t->type);
	return t && btf_is_func_proto(t) ? t : NULL;
}

bool ht_btf_has_tracepoint(const struct btf *btf, const char *name)
{
	return tracepoint_proto(btf, name) != NULL;
}

bool ht_btf_switch_has_prev_state_arg(const struct btf *btf)
{
	const struct btf_type *proto = tracepoint_proto(btf, "sched_switch");

	return proto && btf_vlen(proto) >= 5;
}
