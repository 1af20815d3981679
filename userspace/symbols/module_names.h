/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which mapped file the module of a trigger spec names. Users copy a
 * library's name from wherever they saw it: ldd ("libz.so.1 =>
 * /lib/x86_64-linux-gnu/libz.so.1"), /proc/PID/maps
 * ("/usr/lib/x86_64-linux-gnu/libz.so.1.2.13") or a link line (libz.so for
 * -lz). All of them name one file, so a mapping is module NAME when:
 *
 *	NAME is absolute and is the mapping's path, or resolves to its file
 *	NAME is its file name (a relative path: by its last component)
 *	NAME is its DT_SONAME
 *	NAME, in the mapping's own directory or in a library directory of
 *	the target (/lib, /usr/lib, the multiarch ones, /etc/ld.so.conf),
 *	resolves to its file (a symlink: libz.so.1 -> libz.so.1.2.13)
 *
 * The first two win: a name that is the path or file name of some mapped
 * code means those files only, as it always did, and costs no lookups.
 * "Its file" is the same device and inode as the mapped file. Every name is
 * looked up inside the target's root through target_files.c, so a symlink
 * that points out of that root is followed inside it, never out.
 */
#ifndef HT_MODULE_NAMES_H
#define HT_MODULE_NAMES_H

#include <stddef.h>
#include "symbols/proc_maps.h"
#include "symbols/target_files.h"

struct module_facts;
struct file_key;

/* Matching names against one reading of a process's maps; facts are read once each. */
struct ht_module_names {
	const struct ht_target *tg;
	const struct ht_maps *maps;
	struct module_facts *facts; /* per mapping, read when first needed; NULL: out of memory */
	char **lib_dirs;	    /* the target's library directories, read when first needed */
	size_t nlib_dirs;
	int lib_dirs_read;
	/* The name asked about last, what it resolves to, and each mapping's verdict. */
	char *name;
	struct file_key *keys;
	size_t nkeys;
	int keys_read;
	int named_plainly;    /* some code mapping has NAME as its path or file name */
	signed char *verdict; /* per mapping: -1 not asked yet, 0, 1 */
};

/* For MAPS of the process T opens files of; both outlive MN. */
void ht_module_names_init(struct ht_module_names *mn, const struct ht_target *tg,
			  const struct ht_maps *maps);
void ht_module_names_free(struct ht_module_names *mn);

/* Whether mapping I (an index into the maps) is a file that NAME names. */
int ht_module_names_match(struct ht_module_names *mn, size_t i, const char *name);

#endif /* HT_MODULE_NAMES_H */
