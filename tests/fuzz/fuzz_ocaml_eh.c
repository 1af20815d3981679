// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target for the OCaml trap note reader (userspace/sources/intelpt/ocaml_eh.c):
 * an input that starts like an ELF file goes through the ELF reader, any
 * other through the note parser (its first byte picks the alignment). Any
 * input gives traps, "no note" or a message; never a crash or a read out
 * of bounds. What is accepted must be consistent: no more addresses than
 * the input could hold, sorted once relocated.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/log.h"
#include "sources/intelpt/ocaml_eh.h"

static void check_sorted(const uint64_t *v, size_t n)
{
	for (size_t i = 1; i < n; i++)
		if (v[i - 1] > v[i])
			abort();
}

static void check(const struct ht_ocaml_eh *eh, int rc, size_t size)
{
	if (rc < 0) {
		if (!ht_last_error()[0])
			abort(); /* every failure says why */
		if (eh->nenter || eh->npush || eh->npop)
			abort();
		return;
	}
	if (rc == 1 && (eh->nenter || eh->npush || eh->npop))
		abort();
	/* Each address takes 8 bytes of the input. */
	if ((eh->nenter + eh->npush + eh->npop) * 8 > size)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ht_ocaml_eh eh;
	uint64_t base = 0;
	int rc;

	if (size >= 4 && !memcmp(data, "\177ELF", 4))
		rc = ht_ocaml_eh_read_mem(data, size, &eh, &base);
	else if (size)
		rc = ht_ocaml_eh_parse(data + 1, size - 1, data[0] & 1 ? 8 : 4, &eh);
	else
		rc = ht_ocaml_eh_parse(data, 0, 4, &eh);
	check(&eh, rc, size);
	ht_ocaml_eh_relocate(&eh, 0x555555554000ull + base);
	check_sorted(eh.enter, eh.nenter);
	check_sorted(eh.push, eh.npush);
	check_sorted(eh.pop, eh.npop);
	ht_ocaml_eh_free(&eh);
	return 0;
}
