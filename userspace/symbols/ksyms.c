// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "symbols/ksyms.h"
#include "base/log.h"

struct ksym {
	uint64_t addr;
	uint32_t name_off; /* into names */
};

struct ht_ksyms {
	struct ksym *syms;
	size_t count, cap;
	char *names;
	size_t names_len, names_cap;
	int usable;
};

static int add_symbol(struct ht_ksyms *k, uint64_t addr, const char *name)
{
	size_t n = strlen(name) + 1;

	if (k->count == k->cap) {
		size_t cap = k->cap ? k->cap * 2 : 65536;
		struct ksym *s = realloc(k->syms, cap * sizeof(*s));

		if (!s)
			return -1;
		k->syms = s;
		k->cap = cap;
	}
	if (k->names_len + n > k->names_cap) {
		size_t cap = k->names_cap ? k->names_cap * 2 : 1 << 20;
		char *p;

		while (cap < k->names_len + n)
			cap *= 2;
		p = realloc(k->names, cap);
		if (!p)
			return -1;
		k->names = p;
		k->names_cap = cap;
	}
	memcpy(k->names + k->names_len, name, n);
	k->syms[k->count].addr = addr;
	k->syms[k->count].name_off = (uint32_t)k->names_len;
	k->names_len += n;
	k->count++;
	return 0;
}

static int ksym_cmp(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

struct ht_ksyms *ht_ksyms_load(const char *path)
{
	const char *p = path ? path : "/proc/kallsyms";
	struct ht_ksyms *k;
	char line[512];
	FILE *f;

	f = fopen(p, "re");
	if (!f) {
		ht_fail("cannot read %s: %s", p, strerror(errno));
		return NULL;
	}
	k = calloc(1, sizeof(*k));
	if (!k)
		goto oom;
	while (fgets(line, sizeof(line), f)) {
		char name[256], type, module[128] = "";
		uint64_t addr;
		int n = sscanf(line, "%" SCNx64 " %c %255s %127s", &addr, &type, name, module);

		if (n < 3)
			continue;
		/* Only code: stacks hold return addresses. */
		if (type != 't' && type != 'T' && type != 'w' && type != 'W')
			continue;
		if (addr)
			k->usable = 1;
		if (n == 4 && module[0] == '[') {
			char full[400];

			snprintf(full, sizeof(full), "%s %s", name, module);
			if (add_symbol(k, addr, full))
				goto oom;
		} else if (add_symbol(k, addr, name)) {
			goto oom;
		}
	}
	fclose(f);
	if (k->count > 1)
		qsort(k->syms, k->count, sizeof(*k->syms), ksym_cmp);
	return k;
oom:
	fclose(f);
	ht_ksyms_free(k);
	ht_fail("out of memory reading %s", p);
	return NULL;
}

struct ht_ksyms *ht_ksyms_from_list(const uint64_t *starts, const char *const *names, size_t n)
{
	struct ht_ksyms *k = calloc(1, sizeof(*k));

	if (!k)
		goto oom;
	for (size_t i = 0; i < n; i++)
		if (add_symbol(k, starts[i], names[i]))
			goto oom;
	k->usable = n > 0;
	if (k->count > 1)
		qsort(k->syms, k->count, sizeof(*k->syms), ksym_cmp);
	return k;
oom:
	ht_ksyms_free(k);
	ht_fail("out of memory for kernel symbols");
	return NULL;
}

void ht_ksyms_free(struct ht_ksyms *k)
{
	if (!k)
		return;
	free(k->syms);
	free(k->names);
	free(k);
}

const char *ht_ksyms_find(const struct ht_ksyms *k, uint64_t addr, uint64_t *start)
{
	size_t lo = 0, hi;

	if (!k || !k->usable || !k->count || addr < k->syms[0].addr)
		return NULL;
	hi = k->count;
	/* Last symbol whose address is <= addr. */
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (k->syms[mid].addr <= addr)
			lo = mid;
		else
			hi = mid;
	}
	*start = k->syms[lo].addr;
	return k->names + k->syms[lo].name_off;
}

/* Where symbol I's text ends: the next address (aliases share one). 0: it is the last. */
static uint64_t symbol_end(const struct ht_ksyms *k, size_t i)
{
	size_t j = i + 1;

	while (j < k->count && k->syms[j].addr == k->syms[i].addr)
		j++;
	return j < k->count ? k->syms[j].addr : 0;
}

int ht_ksyms_range(const struct ht_ksyms *k, const char *name, uint64_t *start, uint64_t *end)
{
	if (!k || !k->usable)
		return -1;
	for (size_t i = 0; i < k->count; i++) {
		if (strcmp(k->names + k->syms[i].name_off, name))
			continue;
		*end = symbol_end(k, i);
		if (!*end)
			return -1;
		*start = k->syms[i].addr;
		return 0;
	}
	return -1;
}

size_t ht_ksyms_function_ranges(const struct ht_ksyms *k, const char *name, uint64_t (*ranges)[2],
				size_t max)
{
	size_t len = strlen(name), n = 0;

	if (!k || !k->usable)
		return 0;
	for (size_t i = 0; i < k->count && n < max; i++) {
		const char *sym = k->names + k->syms[i].name_off;
		uint64_t end;

		if (strncmp(sym, name, len) || (sym[len] && sym[len] != '.'))
			continue;
		end = symbol_end(k, i);
		if (!end)
			continue;
		ranges[n][0] = k->syms[i].addr;
		ranges[n][1] = end;
		n++;
	}
	return n;
}

const char *ht_ksyms_format(const struct ht_ksyms *k, uint64_t addr, char *buf, size_t len)
{
	uint64_t start;
	const char *name = ht_ksyms_find(k, addr, &start);
	const char *module;

	if (!name) {
		snprintf(buf, len, "[kernel]+0x%" PRIx64, addr);
		return buf;
	}
	/* "func [mod]" reads better as "func+0x10 [mod]". */
	module = strchr(name, ' ');
	if (module)
		snprintf(buf, len, "%.*s+0x%" PRIx64 "%s", (int)(module - name), name,
			 addr - start, module);
	else
		snprintf(buf, len, "%s+0x%" PRIx64, name, addr - start);
	return buf;
}
