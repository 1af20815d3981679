/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * OCaml exception traps from a binary's .note.ocaml_eh note (emitted by the
 * flambda-backend / OxCaml compiler). An exception handler is a trap frame
 * pushed by one function; a raise jumps straight to the handler, leaving
 * every frame in between without a return. The note lists the addresses of
 * the instructions that push a trap, pop one, and enter a handler, so call
 * stacks can be unwound to the frame that pushed the trap.
 *
 * The note: owner "OCaml", type 1, in section .note.ocaml_eh; its
 * descriptor is a 64-bit recorded base, then three lists of 64-bit
 * addresses each ended by 0: enter-traps, push-traps, pop-traps. The
 * addresses are link-time ones: at run time an address is
 *   address + (runtime address of section .stapsdt.base - recorded base).
 */
#ifndef HT_OCAML_EH_H
#define HT_OCAML_EH_H

#include <stddef.h>
#include <stdint.h>

struct ht_ocaml_eh {
	/*
	 * After parsing: offsets from .stapsdt.base (address - recorded base,
	 * modulo 2^64); after ht_ocaml_eh_relocate(): runtime addresses,
	 * sorted.
	 */
	uint64_t *enter, *push, *pop;
	size_t nenter, npush, npop;
};

/*
 * Parse the bytes of a .note.ocaml_eh section (notes aligned to ALIGN, 4 or
 * 8: the section's sh_addralign). Every note owned by "OCaml" with type 1
 * is read; others are skipped. Pure and bounded (fuzzed): hostile bytes get
 * an error, never a read outside DATA. Returns 0 when a note was found, 1
 * when there is none, -1 with ht_last_error() set when the section is
 * malformed (OUT is then empty).
 */
int ht_ocaml_eh_parse(const void *data, size_t len, size_t align, struct ht_ocaml_eh *out);

/*
 * Find and parse the note of an ELF file, in memory or open as FD (NAME is
 * for messages). *STAPSDT_BASE is set to the link-time address (sh_addr) of
 * section .stapsdt.base. Returns 0, 1 (no note) or -1 as ht_ocaml_eh_parse.
 */
int ht_ocaml_eh_read_mem(const void *image, size_t len, struct ht_ocaml_eh *out,
			 uint64_t *stapsdt_base);
int ht_ocaml_eh_read_fd(int fd, const char *name, struct ht_ocaml_eh *out, uint64_t *stapsdt_base);

/*
 * Make the entries runtime addresses: RUNTIME_BASE is where .stapsdt.base
 * is in the process (its sh_addr plus the mapping's load bias). Sorts them.
 */
void ht_ocaml_eh_relocate(struct ht_ocaml_eh *eh, uint64_t runtime_base);

void ht_ocaml_eh_free(struct ht_ocaml_eh *eh);

#endif /* HT_OCAML_EH_H */
