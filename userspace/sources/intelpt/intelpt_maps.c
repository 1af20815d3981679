// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a decode needs of the target's code: its executable mappings with
 * build-ids, a copy of the vdso, the comm.
 */
#include <errno.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_private.h"
#include "base/log.h"
#include "symbols/target_files.h"

void ht_intelpt_free_maps(struct ht_rawcap_maps *m)
{
	for (size_t i = 0; i < m->count; i++) {
		free(m->v[i].path);
		free(m->v[i].build_id);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* The GNU build-id of an ELF file, from its PT_NOTE segments: lowercase hex, or NULL. */
static char *build_id_of_fd(int fd)
{
	char *hex = NULL;
	size_t nphdr;
	Elf *e;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return NULL;
	e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!e)
		return NULL;
	if (elf_kind(e) != ELF_K_ELF || elf_getphdrnum(e, &nphdr))
		nphdr = 0;
	for (size_t i = 0; i < nphdr && !hex; i++) {
		GElf_Phdr ph;
		Elf_Data *d;
		GElf_Nhdr nh;
		size_t off = 0, name_off, desc_off;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_NOTE)
			continue;
		d = elf_getdata_rawchunk(e, (int64_t)ph.p_offset, ph.p_filesz,
					 ph.p_align == 8 ? ELF_T_NHDR8 : ELF_T_NHDR);
		while (d && !hex && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
			const uint8_t *desc = (const uint8_t *)d->d_buf + desc_off;

			if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
			    memcmp((const char *)d->d_buf + name_off, "GNU", 4) || !nh.n_descsz ||
			    nh.n_descsz > 64)
				continue;
			hex = malloc(nh.n_descsz * 2 + 1);
			for (size_t b = 0; hex && b < nh.n_descsz; b++)
				snprintf(hex + 2 * b, 3, "%02x", desc[b]);
		}
	}
	elf_end(e);
	return hex;
}

/* The build-id of mapping M's file, read once per (device, inode, path). */
static const char *build_id_for(struct ht_intelpt *pt, const struct ht_target *target,
				const struct ht_mapping *m)
{
	struct ht_build_id_entry *e;
	struct stat st;
	char *source = NULL;
	int fd;

	if (m->path[0] != '/' || ht_path_is_deleted(m->path))
		return NULL;
	for (size_t i = 0; i < pt->nbuild_ids; i++) {
		e = &pt->build_ids[i];
		if (e->dev_major == m->dev_major && e->dev_minor == m->dev_minor &&
		    e->inode == m->inode && !strcmp(e->path, m->path))
			return e->build_id;
	}
	if (pt->nbuild_ids == pt->build_ids_cap) {
		size_t cap = pt->build_ids_cap ? pt->build_ids_cap * 2 : 32;
		struct ht_build_id_entry *v = realloc(pt->build_ids, cap * sizeof(*v));

		if (!v)
			return NULL;
		pt->build_ids = v;
		pt->build_ids_cap = cap;
	}
	e = &pt->build_ids[pt->nbuild_ids];
	memset(e, 0, sizeof(*e));
	e->path = strdup(m->path);
	if (!e->path)
		return NULL;
	e->dev_major = m->dev_major;
	e->dev_minor = m->dev_minor;
	e->inode = m->inode;
	fd = ht_target_open_mapping(target, m, &source, &st);
	free(source);
	if (fd >= 0) {
		e->build_id = build_id_of_fd(fd);
		close(fd);
	}
	pt->nbuild_ids++;
	return e->build_id;
}

/* The executable mappings of the target now, with build-ids. 0, or -1 with ht_fail(). */
int ht_intelpt_read_exec_maps(struct ht_intelpt *pt, const struct ht_maps *maps,
			      const struct ht_target *target, struct ht_rawcap_maps *out)
{
	size_t n = 0;

	memset(out, 0, sizeof(*out));
	out->taken_ns = clock_ns(CLOCK_MONOTONIC);
	for (size_t i = 0; i < maps->count; i++)
		n += ht_mapping_is_exec(&maps->v[i]);
	if (!n)
		return 0;
	out->v = calloc(n, sizeof(*out->v));
	if (!out->v)
		return ht_fail("out of memory");
	for (size_t i = 0; i < maps->count; i++) {
		const struct ht_mapping *m = &maps->v[i];
		struct ht_rawcap_mapping *x;
		const char *id;

		if (!ht_mapping_is_exec(m))
			continue;
		x = &out->v[out->count++];
		x->start = m->start;
		x->end = m->end;
		x->offset = m->offset;
		memcpy(x->perms, m->perms, sizeof(x->perms));
		x->path = strdup(m->path);
		id = build_id_for(pt, target, m);
		x->build_id = id ? strdup(id) : NULL;
		if (!x->path || (id && !x->build_id)) {
			ht_intelpt_free_maps(out);
			return ht_fail("out of memory");
		}
	}
	return 0;
}

/* Each process named, at attach: what a process that exits before a freeze ran. */
void ht_intelpt_read_attach_maps(struct ht_intelpt *pt)
{
	pt->attach_maps = calloc(pt->cfg.ntgids, sizeof(*pt->attach_maps));
	if (!pt->attach_maps)
		return; /* the freeze reads them again */
	for (unsigned int i = 0; i < pt->cfg.ntgids; i++) {
		struct ht_rawcap_maps *m = &pt->attach_maps[pt->nattach_maps];
		int tgid = pt->cfg.tgids[i];
		struct ht_target target;
		struct ht_maps maps;

		if (ht_maps_read(tgid, &maps))
			continue;
		ht_target_init(&target, tgid);
		ht_target_reopen_root(&target);
		if (!ht_intelpt_read_exec_maps(pt, &maps, &target, m)) {
			m->pid = tgid;
			pt->nattach_maps++;
		}
		ht_target_close(&target);
		ht_maps_free(&maps);
	}
}

/* The target's vdso: its own bytes through /proc/PID/mem, else ours when the size matches. */
int ht_intelpt_copy_vdso(const struct ht_maps *maps, const struct ht_target *target,
			 struct ht_rawcap *out)
{
	for (size_t i = 0; i < maps->count; i++) {
		const struct ht_mapping *m = &maps->v[i];
		size_t len = (size_t)(m->end - m->start);
		bool ours;

		if (strcmp(m->path, "[vdso]") || !len || len > HT_VDSO_MAX_BYTES)
			continue;
		out->vdso = ht_target_copy_vdso(target, m->start, len, &ours);
		if (!out->vdso && errno == ENOMEM)
			return ht_fail("out of memory copying the vdso");
		if (out->vdso) {
			out->vdso_addr = m->start;
			out->vdso_len = len;
		}
		return 0;
	}
	return 0;
}

int ht_intelpt_copy_maps(struct ht_rawcap_maps *dst, const struct ht_rawcap_maps *src)
{
	memset(dst, 0, sizeof(*dst));
	dst->pid = src->pid;
	dst->taken_ns = src->taken_ns;
	if (!src->count)
		return 0;
	dst->v = calloc(src->count, sizeof(*dst->v));
	if (!dst->v)
		return -1;
	for (size_t i = 0; i < src->count; i++) {
		dst->v[i] = src->v[i];
		dst->v[i].path = strdup(src->v[i].path);
		dst->v[i].build_id = src->v[i].build_id ? strdup(src->v[i].build_id) : NULL;
		dst->count = i + 1;
		if (!dst->v[i].path || (src->v[i].build_id && !dst->v[i].build_id))
			return -1;
	}
	return 0;
}

void ht_intelpt_read_comm(int pid, char *comm, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (ht_intelpt_read_text(path, comm, len))
		comm[0] = 0;
}
