/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * User stacks from DWARF CFI (elfutils libdwfl), for samples taken with
 * PERF_SAMPLE_REGS_USER and PERF_SAMPLE_STACK_USER from code built without
 * frame pointers. The thread has moved on by the time a sample is read, so
 * unwinding is offline: registers and stack memory come from the sample,
 * everything else (.eh_frame, .debug_frame) from the process's ELF files,
 * opened through the target's own view of the file system.
 *
 * One unwinder per process, kept for the whole session: its modules, ELF
 * files and CFI tables are loaded once and reused by every sample. An
 * unwinder is not thread-safe; use each from one thread at a time.
 */
#ifndef HT_UNWIND_DWARF_H
#define HT_UNWIND_DWARF_H

#include <stddef.h>
#include <stdint.h>

/*
 * The x86-64 user registers a sample carries, in PERF_REG_X86_* order
 * (linux/perf_regs.h): AX BX CX DX SI DI BP SP IP FLAGS CS SS DS ES FS GS
 * R8..R15. libdw's x86-64 frame state is DWARF registers 0-16: the sixteen
 * general-purpose registers and the return address (IP). The innermost
 * frame's CFA rule can name any of them (RSP usually, RBP after a frame
 * setup, R10 or R11 inside a stack-realigning prologue), and the callee-saved
 * ones seed the frames above, so all of them are requested; FLAGS and the
 * segment registers never take part in x86-64 CFI and are left out.
 */
#define HT_DWARF_SAMPLE_REGS_MASK 0x0000000000ff01ffULL /* AX..IP, R8..R15 */
#define HT_DWARF_SAMPLE_NREGS	  17

/* Where each register sits in ht_user_regs.regs: the mask's bits in order. */
enum ht_dwarf_reg {
	HT_DWARF_REG_AX,
	HT_DWARF_REG_BX,
	HT_DWARF_REG_CX,
	HT_DWARF_REG_DX,
	HT_DWARF_REG_SI,
	HT_DWARF_REG_DI,
	HT_DWARF_REG_BP,
	HT_DWARF_REG_SP,
	HT_DWARF_REG_IP,
	HT_DWARF_REG_R8,
	HT_DWARF_REG_R9,
	HT_DWARF_REG_R10,
	HT_DWARF_REG_R11,
	HT_DWARF_REG_R12,
	HT_DWARF_REG_R13,
	HT_DWARF_REG_R14,
	HT_DWARF_REG_R15,
};

/* perf's PERF_SAMPLE_REGS_ABI_*: only 64-bit samples are unwound. */
#define HT_DWARF_REGS_ABI_NONE 0
#define HT_DWARF_REGS_ABI_32   1
#define HT_DWARF_REGS_ABI_64   2

/* PERF_SAMPLE_REGS_USER as a sample gives it with HT_DWARF_SAMPLE_REGS_MASK. */
struct ht_user_regs {
	uint64_t abi;
	uint64_t regs[HT_DWARF_SAMPLE_NREGS]; /* in mask order, enum ht_dwarf_reg */
};

struct ht_dwarf_unwinder;

/*
 * An unwinder for process PID, with the modules its /proc/PID/maps shows
 * now. ELF files are opened through target_files.c when their mappings
 * appear: /proc/PID/map_files (needs CAP_SYS_ADMIN or
 * CAP_CHECKPOINT_RESTORE) or else by path inside /proc/PID/root, so a target
 * in a container is read through its own mount namespace; separate debug
 * files by build-id inside that root too. Returns NULL with ht_last_error()
 * set.
 */
struct ht_dwarf_unwinder *ht_dwarf_unwinder_new(int pid);

/*
 * Re-read /proc/PID/maps and report what changed (libraries are loaded
 * late): nothing is done when the maps are unchanged, and modules that kept
 * their name and range keep their open files and CFI. Returns 0, or -1 with
 * ht_last_error() set (the process is gone, say); the unwinder then keeps
 * the modules it had and stays usable.
 */
int ht_dwarf_unwinder_refresh(struct ht_dwarf_unwinder *u);

/*
 * Unwind one sample. REGS as the sample gave them (mask
 * HT_DWARF_SAMPLE_REGS_MASK); STACK is the copied user stack, STACK_LEN
 * bytes starting at REGS' SP. Stack memory is read only from STACK, with
 * every read bounds-checked; nothing is read from the target.
 *
 * Fills IPS innermost first and returns how many: ips[0] is the sampled IP
 * (an exact address); every later entry is a return address, one past its
 * call instruction: subtract 1 before symbolizing it, or it can name the
 * function after a call that never returns. Stops at the end of the copied
 * stack, at a zero IP or one outside every module, when the stack pointer
 * stops growing, at the outermost frame, or at MAX_IPS; an unwind that fails
 * midway returns the frames it found. Returns 0 for a zero IP or a sample
 * without 64-bit user registers (ips[0] alone for a 32-bit one).
 */
int ht_dwarf_unwind(struct ht_dwarf_unwinder *u, const struct ht_user_regs *regs,
		    const uint8_t *stack, size_t stack_len, uint64_t *ips, int max_ips);

void ht_dwarf_unwinder_free(struct ht_dwarf_unwinder *u);

#endif /* HT_UNWIND_DWARF_H */
