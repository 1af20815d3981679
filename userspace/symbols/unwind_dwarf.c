// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Offline user-stack unwinding with elfutils libdwfl, the way
 * `perf report --call-graph dwarf` does it, but with one Dwfl per process
 * kept across samples instead of one per sample: building a Dwfl, opening
 * its ELF files and indexing their CFI costs far more than an unwind.
 *
 * The Dwfl is attached once to a "process" whose single thread is whatever
 * sample is being unwound: set_initial_registers hands libdwfl the sample's
 * registers and memory_read serves words from the sample's stack copy.
 */
#include <dwarf.h>
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/log.h"
#include "symbols/proc_maps.h"
#include "symbols/target_files.h"
#include "symbols/unwind_dwarf.h"

/* libdw's x86-64 DWARF register numbers (the psABI's), as the frame state holds them. */
#define DWARF_X86_64_RSP   7
#define DWARF_X86_64_NREGS 17 /* RAX..R15 and the return address, RIP */

/* One module: the mappings of one file, or the vdso. */
struct ht_dwarf_module {
	struct ht_dwarf_unwinder *owner;
	struct ht_mapping first; /* its first mapping (path owned): what its file is opened by */
	uint8_t *vdso_image;	 /* the vdso's copy, which its Elf reads from */
	bool is_vdso;
	bool debug_found; /* the separate debug file was handed out */
	bool reported;	  /* in the report being made */
	/*
	 * The file, opened when the module was reported, while the target
	 * surely lives; handed to libdwfl when it first needs it. -1: none.
	 */
	int held_fd;
	char *held_name;
};

/* The sample being unwound, for the callbacks. */
struct ht_dwarf_sample {
	const struct ht_user_regs *regs;
	const uint8_t *stack;
	size_t stack_len;
	uint64_t *ips;
	int max_ips;
	int nips;
	uint64_t last_sp;
};

struct ht_dwarf_unwinder {
	int pid;
	struct ht_target target; /* every file of the process is opened through it */
	Dwfl *dwfl;
	/* A bare ELF header that tells libdwfl the architecture before any module is opened. */
	Elf *arch_elf;
	Elf64_Ehdr arch_ehdr;
	struct ht_maps maps; /* as last reported; none after a failed report */
	struct ht_dwarf_module **modules;
	size_t nmodules;
	size_t modules_cap;
	struct ht_dwarf_sample sample;
};

/* ---- files the target sees ---------------------------------------------- */

/*
 * The module's file, as the target maps it (target_files.c: map_files, else
 * its path resolved inside the target's root, and only the mapped inode).
 * Returns an fd and *NAME (allocated), or -1.
 */
static int open_module_file(const struct ht_dwarf_module *m, char **name)
{
	struct stat st;

	return ht_target_open_mapping(&m->owner->target, &m->first, name, &st);
}

/* The vdso has no file: its Elf reads a copy of its image. */
static Elf *vdso_elf(struct ht_dwarf_module *m, uint64_t len)
{
	uint8_t *image;
	bool ours;
	Elf *elf;

	if (len == 0 || len > HT_VDSO_MAX_BYTES)
		return NULL;
	image = ht_target_copy_vdso(&m->owner->target, m->first.start, len, &ours);
	if (!image)
		return NULL;
	elf = elf_memory((char *)image, len);
	if (!elf) {
		free(image);
		return NULL;
	}
	free(m->vdso_image);
	m->vdso_image = image;
	return elf;
}

/* ---- libdwfl's file callbacks -------------------------------------------- */

static int find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
		    char **file_name, Elf **elfp)
{
	struct ht_dwarf_module *m = *userdata;
	char *opened = NULL;
	int fd;

	(void)mod;
	(void)modname;
	(void)base;
	if (!m)
		return -1;
	if (m->is_vdso) {
		/* libdwfl takes an Elf without a descriptor; -1 says there is none. */
		*elfp = vdso_elf(m, m->first.end - m->first.start);
		return -1;
	}
	/* Held since the module appeared: the target may have exited by now. libdwfl owns it. */
	if (m->held_fd >= 0) {
		fd = m->held_fd;
		*file_name = m->held_name;
		m->held_fd = -1;
		m->held_name = NULL;
		return fd;
	}
	/*
	 * On failure *file_name must stay unset: libdwfl would open that name
	 * itself, in our root, and could find a different file there.
	 */
	fd = open_module_file(m, &opened);
	if (fd >= 0)
		*file_name = opened;
	return fd;
}

/*
 * Separate debug files by build-id only (.debug_frame for code whose
 * .eh_frame was stripped or never made): first the target's
 * /usr/lib/debug, then ours, opened as the symbolizer opens them. Not
 * dwfl_standard_find_debuginfo: it may ask debuginfod servers over the
 * network, in the middle of a dump, and it opens paths in our own root.
 */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			  const char *file_name, const char *debuglink_file,
			  GElf_Word debuglink_crc, char **debuginfo_file_name)
{
	struct ht_dwarf_module *m = *userdata;
	const unsigned char *id;
	char hex[2 * 64 + 1], shown[PATH_MAX + 64];
	GElf_Addr id_vaddr;
	int id_len, fd = -1;

	(void)modname;
	(void)base;
	(void)file_name;
	(void)debuglink_file;
	(void)debuglink_crc;
	/* After the debug file, a second call asks for its dwz file: CFI never needs that. */
	if (!m || m->debug_found)
		return -1;
	id_len = dwfl_module_build_id(mod, &id, &id_vaddr);
	if (id_len < 2 || id_len > 64)
		return -1;
	for (int i = 0; i < id_len; i++)
		snprintf(hex + 2 * i, 3, "%02x", id[i]);
	for (int place = 0; place < HT_DEBUG_PLACES && fd < 0; place++)
		fd = ht_target_open_build_id_debug(&m->owner->target, hex, place, shown,
						   sizeof(shown));
	if (fd < 0)
		return -1;
	m->debug_found = true;
	*debuginfo_file_name = strdup(shown);
	return fd;
}

static const Dwfl_Callbacks dwfl_callbacks = {
	.find_elf = find_elf,
	.find_debuginfo = find_debuginfo,
};

/* ---- libdwfl's thread callbacks: the sample is the thread ---------------- */

static pid_t next_thread(Dwfl *dwfl, void *dwfl_arg, void **thread_argp)
{
	struct ht_dwarf_unwinder *u = dwfl_arg;

	(void)dwfl;
	if (*thread_argp)
		return 0;
	*thread_argp = u;
	return u->pid;
}

/* Any thread id: the registers and stack come from the sample, whichever thread it was. */
static bool get_thread(Dwfl *dwfl, pid_t tid, void *dwfl_arg, void **thread_argp)
{
	(void)dwfl;
	(void)tid;
	*thread_argp = dwfl_arg;
	return true;
}

/* Stack words from the copy only; an address outside it ends the unwind there. */
static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *dwfl_arg)
{
	const struct ht_dwarf_sample *s = &((struct ht_dwarf_unwinder *)dwfl_arg)->sample;
	uint64_t sp, offset;

	(void)dwfl;
	if (!s->stack || !s->regs)
		return false;
	sp = s->regs->regs[HT_DWARF_REG_SP];
	if (addr < sp)
		return false;
	offset = addr - sp;
	if (offset >= s->stack_len || s->stack_len - offset < sizeof(*result))
		return false;
	memcpy(result, s->stack + offset, sizeof(*result));
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *thread_arg)
{
	const struct ht_dwarf_unwinder *u = thread_arg;
	const uint64_t *r = u->sample.regs->regs;
	/* perf's register order to the psABI's DWARF numbering. */
	const Dwarf_Word dwarf_regs[DWARF_X86_64_NREGS] = {
		r[HT_DWARF_REG_AX],  r[HT_DWARF_REG_DX],  r[HT_DWARF_REG_CX],  r[HT_DWARF_REG_BX],
		r[HT_DWARF_REG_SI],  r[HT_DWARF_REG_DI],  r[HT_DWARF_REG_BP],  r[HT_DWARF_REG_SP],
		r[HT_DWARF_REG_R8],  r[HT_DWARF_REG_R9],  r[HT_DWARF_REG_R10], r[HT_DWARF_REG_R11],
		r[HT_DWARF_REG_R12], r[HT_DWARF_REG_R13], r[HT_DWARF_REG_R14], r[HT_DWARF_REG_R15],
		r[HT_DWARF_REG_IP],
	};

	return dwfl_thread_state_registers(thread, 0, DWARF_X86_64_NREGS, dwarf_regs);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.get_thread = get_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* ---- modules from /proc/PID/maps ----------------------------------------- */

/* The mappings of one file, consecutive in /proc/PID/maps. */
struct maps_group {
	const struct ht_mapping *first; /* NULL: no group open */
	uint64_t start, end;		/* the module: first mapping's file start to last's end */
	bool exec;
};

static void module_free(struct ht_dwarf_module *m)
{
	if (!m)
		return;
	if (m->held_fd >= 0)
		close(m->held_fd);
	free(m->held_name);
	free(m->first.path);
	free(m->vdso_image);
	free(m);
}

static int track_module(struct ht_dwarf_unwinder *u, struct ht_dwarf_module *m)
{
	if (u->nmodules == u->modules_cap) {
		size_t cap = u->modules_cap ? u->modules_cap * 2 : 64;
		struct ht_dwarf_module **bigger = realloc(u->modules, cap * sizeof(*bigger));

		if (!bigger)
			return -1;
		u->modules = bigger;
		u->modules_cap = cap;
	}
	u->modules[u->nmodules++] = m;
	return 0;
}

/* Report one group to libdwfl; a module it already had keeps its files and CFI. */
static int report_group(struct ht_dwarf_unwinder *u, const struct maps_group *g)
{
	const char *path = g->first ? g->first->path : NULL;
	struct ht_dwarf_module *m;
	Dwfl_Module *mod;
	void **userdata;

	if (!g->first || !g->exec)
		return 0;
	mod = dwfl_report_module(u->dwfl, path, g->start, g->end);
	if (!mod)
		return ht_fail("cannot report %s: %s", path, dwfl_errmsg(-1));
	dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL);
	if (*userdata) {
		((struct ht_dwarf_module *)*userdata)->reported = true;
		return 0;
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return ht_fail("out of memory reporting %s", path);
	m->first = *g->first;
	m->first.path = strdup(path);
	m->held_fd = -1;
	if (!m->first.path || track_module(u, m)) {
		module_free(m);
		return ht_fail("out of memory reporting %s", path);
	}
	m->owner = u;
	m->is_vdso = !strcmp(path, "[vdso]");
	m->reported = true;
	if (!m->is_vdso)
		m->held_fd = open_module_file(m, &m->held_name);
	*userdata = m;
	return 0;
}

/* Whether mapping M continues the group: the same file, further up. */
static bool same_file(const struct maps_group *g, const struct ht_mapping *m)
{
	const struct ht_mapping *first = g->first;

	return first && first->inode == m->inode && first->dev_major == m->dev_major &&
	       first->dev_minor == m->dev_minor && !strcmp(first->path, m->path);
}

/* Only files (a path) and the vdso have ELF images; [heap], [stack], anonymous have none. */
static bool is_module_path(const char *path)
{
	return path[0] == '/' || !strcmp(path, "[vdso]");
}

static int report_maps(struct ht_dwarf_unwinder *u, const struct ht_maps *maps)
{
	struct maps_group group = {0};
	int err = 0;

	for (size_t i = 0; i < maps->count && !err; i++) {
		const struct ht_mapping *m = &maps->v[i];

		if (!is_module_path(m->path)) {
			err = report_group(u, &group);
			group.first = NULL;
			continue;
		}
		if (same_file(&group, m)) {
			group.end = m->end;
			group.exec |= ht_mapping_is_exec(m);
			continue;
		}
		err = report_group(u, &group);
		/* From where its offset 0 would be: libdwfl takes the load bias from there. */
		group = (struct maps_group){
			.first = m,
			.start = m->offset <= m->start ? m->start - m->offset : m->start,
			.end = m->end,
			.exec = ht_mapping_is_exec(m),
		};
	}
	if (!err)
		err = report_group(u, &group);
	return err;
}

/* Free the records of modules libdwfl dropped, now that their Elfs are gone. */
static void sweep_modules(struct ht_dwarf_unwinder *u)
{
	size_t kept = 0;

	for (size_t i = 0; i < u->nmodules; i++) {
		if (u->modules[i]->reported)
			u->modules[kept++] = u->modules[i];
		else
			module_free(u->modules[i]);
	}
	u->nmodules = kept;
}

static bool same_mapping(const struct ht_mapping *a, const struct ht_mapping *b)
{
	return a->start == b->start && a->end == b->end && a->offset == b->offset &&
	       a->dev_major == b->dev_major && a->dev_minor == b->dev_minor &&
	       a->inode == b->inode && !memcmp(a->perms, b->perms, sizeof(a->perms)) &&
	       !strcmp(a->path, b->path);
}

static bool same_maps(const struct ht_maps *a, const struct ht_maps *b)
{
	if (a->count != b->count)
		return false;
	for (size_t i = 0; i < a->count; i++)
		if (!same_mapping(&a->v[i], &b->v[i]))
			return false;
	return true;
}

int ht_dwarf_unwinder_refresh(struct ht_dwarf_unwinder *u)
{
	struct ht_maps maps;
	int err;

	if (!u)
		return ht_fail("no unwinder");
	if (ht_maps_read(u->pid, &maps))
		return -1;
	/* A zombie's maps are empty: keep its modules for the samples still queued. */
	if (maps.count == 0) {
		ht_maps_free(&maps);
		return ht_fail("pid %d has exited: no mappings to report", u->pid);
	}
	/* Unchanged maps, the usual case between samples: nothing to redo. */
	if (same_maps(&maps, &u->maps)) {
		ht_maps_free(&maps);
		return 0;
	}
	/*
	 * Its root again (chroot, exec); without it files still open through
	 * map_files, so a failure here is no reason to stop.
	 */
	ht_target_reopen_root(&u->target);
	for (size_t i = 0; i < u->nmodules; i++)
		u->modules[i]->reported = false;
	dwfl_report_begin(u->dwfl);
	err = report_maps(u, &maps);
	/* Ends the report even after an error: the Dwfl is unusable until it is ended. */
	if (dwfl_report_end(u->dwfl, NULL, NULL) && !err)
		err = ht_fail("cannot report modules of pid %d: %s", u->pid, dwfl_errmsg(-1));
	sweep_modules(u);
	ht_maps_free(&u->maps);
	/* After an error no maps are kept, so that the next refresh reports them again. */
	if (err)
		ht_maps_free(&maps);
	u->maps = maps;
	return err;
}

/* ---- unwinding ------------------------------------------------------------ */

static int on_frame(Dwfl_Frame *state, void *arg)
{
	struct ht_dwarf_unwinder *u = arg;
	struct ht_dwarf_sample *s = &u->sample;
	Dwarf_Addr pc;
	Dwarf_Word sp;

	if (!dwfl_frame_pc(state, &pc, NULL) || pc == 0)
		return DWARF_CB_ABORT;
	if (dwfl_frame_reg(state, DWARF_X86_64_RSP, &sp) != 0)
		return DWARF_CB_ABORT;
	if (s->nips > 0) {
		/* A return address outside every module is garbage read as one. */
		if (!dwfl_addrmodule(u->dwfl, pc - 1))
			return DWARF_CB_ABORT;
		/* Each caller's frame lies above its callee's; anything else loops or strays. */
		if (sp <= s->last_sp)
			return DWARF_CB_ABORT;
	}
	s->last_sp = sp;
	s->ips[s->nips++] = pc;
	return s->nips < s->max_ips ? DWARF_CB_OK : DWARF_CB_ABORT;
}

int ht_dwarf_unwind(struct ht_dwarf_unwinder *u, const struct ht_user_regs *regs,
		    const uint8_t *stack, size_t stack_len, uint64_t *ips, int max_ips)
{
	struct ht_dwarf_sample *s;
	int nips;

	if (!u || !regs || !ips || max_ips <= 0 || regs->regs[HT_DWARF_REG_IP] == 0)
		return 0;
	if (regs->abi != HT_DWARF_REGS_ABI_64) {
		/* A 32-bit task's frames follow another ABI than this Dwfl's: its IP alone. */
		if (regs->abi != HT_DWARF_REGS_ABI_32)
			return 0;
		ips[0] = regs->regs[HT_DWARF_REG_IP];
		return 1;
	}
	s = &u->sample;
	*s = (struct ht_dwarf_sample){
		.regs = regs,
		.stack = stack,
		.stack_len = stack ? stack_len : 0,
		.ips = ips,
		.max_ips = max_ips,
	};
	/* Its result says only why the walk ended, and every way it ends keeps the frames found. */
	dwfl_getthread_frames(u->dwfl, u->pid, on_frame, u);
	nips = s->nips;
	if (nips == 0) {
		ips[0] = regs->regs[HT_DWARF_REG_IP];
		nips = 1;
	}
	*s = (struct ht_dwarf_sample){0};
	return nips;
}

/* ---- lifetime ------------------------------------------------------------- */

/* An ELF header alone: enough for libdwfl to pick its x86-64 backend. */
static Elf *arch_elf(Elf64_Ehdr *ehdr)
{
	memset(ehdr, 0, sizeof(*ehdr));
	memcpy(ehdr->e_ident, ELFMAG, SELFMAG);
	ehdr->e_ident[EI_CLASS] = ELFCLASS64;
	ehdr->e_ident[EI_DATA] = ELFDATA2LSB;
	ehdr->e_ident[EI_VERSION] = EV_CURRENT;
	ehdr->e_type = ET_DYN;
	ehdr->e_machine = EM_X86_64;
	ehdr->e_version = EV_CURRENT;
	ehdr->e_ehsize = sizeof(*ehdr);
	return elf_memory((char *)ehdr, sizeof(*ehdr));
}

struct ht_dwarf_unwinder *ht_dwarf_unwinder_new(int pid)
{
	struct ht_dwarf_unwinder *u;

	if (pid <= 0) {
		ht_fail("no process %d to unwind", pid);
		return NULL;
	}
	u = calloc(1, sizeof(*u));
	if (!u) {
		ht_fail("out of memory");
		return NULL;
	}
	u->pid = pid;
	ht_target_init(&u->target, pid);
	elf_version(EV_CURRENT);
	u->arch_elf = arch_elf(&u->arch_ehdr);
	u->dwfl = dwfl_begin(&dwfl_callbacks);
	if (!u->arch_elf || !u->dwfl) {
		ht_fail("cannot start libdwfl: %s", dwfl_errmsg(-1));
		goto fail;
	}
	if (!dwfl_attach_state(u->dwfl, u->arch_elf, pid, &thread_callbacks, u)) {
		ht_fail("cannot set up unwinding for pid %d: %s", pid, dwfl_errmsg(-1));
		goto fail;
	}
	if (ht_dwarf_unwinder_refresh(u))
		goto fail;
	return u;
fail:
	ht_dwarf_unwinder_free(u);
	return NULL;
}

void ht_dwarf_unwinder_free(struct ht_dwarf_unwinder *u)
{
	if (!u)
		return;
	/* libdwfl ends the modules' Elfs first: the vdso's reads the image freed below. */
	if (u->dwfl)
		dwfl_end(u->dwfl);
	if (u->arch_elf)
		elf_end(u->arch_elf);
	for (size_t i = 0; i < u->nmodules; i++)
		module_free(u->modules[i]);
	free(u->modules);
	ht_maps_free(&u->maps);
	ht_target_close(&u->target);
	free(u);
}
