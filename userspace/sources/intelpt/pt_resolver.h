/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Symbol resolvers for the PT call stacks (callstack.h's ht_pt_resolve_fn):
 * one over saved mappings, reading the ELF files with elf_symbols.h (the
 * offline path, and tests), which also finds the OCaml trap notes of those
 * files; and one over the live per-process symbolizer (symbolizer.h).
 */
#ifndef HT_PT_RESOLVER_H
#define HT_PT_RESOLVER_H

#include <stddef.h>
#include <stdint.h>
#include "sources/intelpt/callstack.h"
#include "sources/intelpt/intelpt_decode.h"

struct ht_ocaml_eh;
struct ht_pt_elf_resolver;

/*
 * Read the ELF files of MAPS (file mappings by path, memory ones such as
 * the vdso from their bytes). A file that cannot be read resolves nothing
 * (its code shows as "module+0xoffset"). Returns NULL with ht_last_error()
 * set only when out of memory.
 */
struct ht_pt_elf_resolver *ht_pt_elf_resolver_new(const struct ht_pt_mapping *maps, size_t n);
void ht_pt_elf_resolver_free(struct ht_pt_elf_resolver *r);

/* An ht_pt_resolve_fn: CTX is the struct ht_pt_elf_resolver. */
int ht_pt_elf_resolve(void *ctx, uint64_t addr, struct ht_pt_symbol *out);

/*
 * The OCaml trap tables of the mapped files that carry a .note.ocaml_eh,
 * relocated to where they are mapped: pass them in ht_callstack_config.
 * Returns how many; *TABLES stays valid for the resolver's life.
 */
size_t ht_pt_elf_resolver_ocaml(const struct ht_pt_elf_resolver *r,
				const struct ht_ocaml_eh *const **tables);

/* An ht_pt_resolve_fn over the live symbolizer: CTX is a struct ht_symbolizer. */
int ht_pt_resolve_symbolizer(void *ctx, uint64_t addr, struct ht_pt_symbol *out);

#endif /* HT_PT_RESOLVER_H */
