// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * DWARF unwinding of real stacks: a program built here at run time, without
 * frame pointers, calls main -> alpha -> beta -> gamma; gamma captures its
 * own registers and a copy of its stack, as a PERF_SAMPLE_REGS_USER +
 * PERF_SAMPLE_STACK_USER sample would carry them, writes them to stdout and
 * waits. The test unwinds that "sample" and symbolizes the frames.
 */
#include <dirent.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "programs.h"
#include "base/log.h"
#include "symbols/unwind_dwarf.h"

#define CAPTURE_MAGIC	 0x68747374616b6361ULL
#define STACK_COPY_BYTES 16384
#define MAX_FRAMES	 64
#define DEEP_FRAMES	 16 /* extra frames for the speed test: about 24 in all */
#define CHILD_TIMEOUT_MS 10000
/* No frame pointers; gamma is also a libm builtin, not wanted here. */
#define COMMON_CFLAGS "-O2 -fomit-frame-pointer -fno-builtin-gamma"

/* The registers gamma captures, in perf's order and HT_DWARF_SAMPLE_REGS_MASK's selection. */
static const char capture_h[] =
	"#include <stdint.h>\n"
	"#include <stdio.h>\n"
	"#include <string.h>\n"
	"#include <unistd.h>\n"
	"#ifdef __clang__\n"
	"#define KEEP __attribute__((noinline, used))\n"
	"#else\n"
	"#define KEEP __attribute__((noinline, noipa))\n"
	"#endif\n"
	"struct capture_header { uint64_t magic, abi, regs[17], stack_len; };\n"
	"static uint64_t cap_regs[17];\n"
	"static uint8_t cap_stack[16384];\n"
	"static volatile int cap_counter;\n"
	/* AX BX CX DX SI DI BP SP IP R8..R15: rip is the label's, where rsp is the one stored. */
	"#define CAPTURE_REGS() asm volatile(\\\n"
	"	\"movq %%rax, 0(%0)\\n\\tmovq %%rbx, 8(%0)\\n\\tmovq %%rcx, 16(%0)\\n\\t\"\\\n"
	"	\"movq %%rdx, 24(%0)\\n\\tmovq %%rsi, 32(%0)\\n\\tmovq %%rdi, 40(%0)\\n\\t\"\\\n"
	"	\"movq %%rbp, 48(%0)\\n\\tmovq %%rsp, 56(%0)\\n\\tmovq %%r8, 72(%0)\\n\\t\"\\\n"
	"	\"movq %%r9, 80(%0)\\n\\tmovq %%r10, 88(%0)\\n\\tmovq %%r11, 96(%0)\\n\\t\"\\\n"
	"	\"movq %%r12, 104(%0)\\n\\tmovq %%r13, 112(%0)\\n\\tmovq %%r14, 120(%0)\\n\\t\"\\\n"
	"	\"movq %%r15, 128(%0)\\n\\t\"\\\n"
	"	\"1: leaq 1b(%%rip), %%rax\\n\\tmovq %%rax, 64(%0)\\n\\t\"\\\n"
	"	: : \"r\"(cap_regs) : \"rax\", \"memory\")\n"
	/* How much stack lies above SP: the copy must not run past the mapping. */
	"static size_t stack_room(uint64_t sp)\n"
	"{\n"
	"	unsigned long long start, end;\n"
	"	char line[512];\n"
	"	size_t room = 0;\n"
	"	FILE *f = fopen(\"/proc/self/maps\", \"r\");\n"
	"	while (f && fgets(line, sizeof(line), f))\n"
	"		if (sscanf(line, \"%llx-%llx\", &start, &end) == 2 &&\n"
	"		    sp >= start && sp < end)\n"
	"			room = end - sp;\n"
	"	if (f)\n"
	"		fclose(f);\n"
	"	return room;\n"
	"}\n"
	"static void write_all(const void *p, size_t n)\n"
	"{\n"
	"	while (n) {\n"
	"		ssize_t w = write(1, p, n);\n"
	"		if (w <= 0)\n"
	"			_exit(3);\n"
	"		p = (const char *)p + w;\n"
	"		n -= (size_t)w;\n"
	"	}\n"
	"}\n"
	"static KEEP void send_capture_and_wait(void)\n"
	"{\n"
	"	struct capture_header h = { 0x68747374616b6361ULL, 2, { 0 }, 0 };\n"
	"	char c;\n"
	"	h.stack_len = stack_room(cap_regs[7]);\n"
	"	if (h.stack_len > sizeof(cap_stack))\n"
	"		h.stack_len = sizeof(cap_stack);\n"
	"	memcpy(cap_stack, (const void *)cap_regs[7], h.stack_len);\n"
	"	memcpy(h.regs, cap_regs, sizeof(h.regs));\n"
	"	write_all(&h, sizeof(h));\n"
	"	write_all(cap_stack, h.stack_len);\n"
	"	while (read(0, &c, 1) > 0)\n"
	"		;\n"
	"}\n"
	"#define GAMMA_BODY() \\\n"
	"	do { CAPTURE_REGS(); send_capture_and_wait(); cap_counter++; } while (0)\n";

/* main -> alpha -> beta -> [deep x N] -> gamma, each doing work after its call: no tail calls. */
static const char chain_c[] =
	"#include <dlfcn.h>\n"
	"#include <stdlib.h>\n"
	"#include \"capture.h\"\n"
	"static void (*gamma_fn)(void);\n"
	"KEEP void gamma(void) { GAMMA_BODY(); }\n"
	"KEEP void deep(int n) { if (n > 1) deep(n - 1); else gamma_fn(); cap_counter++; }\n"
	"KEEP void beta(int depth)\n"
	"{\n"
	"	if (depth > 0)\n"
	"		deep(depth);\n"
	"	else\n"
	"		gamma_fn();\n"
	"	cap_counter++;\n"
	"}\n"
	"KEEP void alpha(int depth) { beta(depth); cap_counter++; }\n"
	"int main(int argc, char **argv)\n"
	"{\n"
	"	int depth = 0;\n"
	"	char c;\n"
	"	gamma_fn = gamma;\n"
	"	if (argc > 2 && !strcmp(argv[1], \"--deep\"))\n"
	"		depth = atoi(argv[2]);\n"
	"	if (argc > 2 && !strcmp(argv[1], \"--dlopen\")) {\n"
	/* Wait until told: the unwinder must exist before the library does. */
	"		if (read(0, &c, 1) != 1)\n"
	"			return 4;\n"
	"		void *lib = dlopen(argv[2], RTLD_NOW);\n"
	"		if (!lib || !(gamma_fn = (void (*)(void))dlsym(lib, \"gamma\")))\n"
	"			return 5;\n"
	"	}\n"
	"	alpha(depth);\n"
	"	cap_counter++;\n"
	"	return 0;\n"
	"}\n";

static const char lib_c[] = "#include \"capture.h\"\n"
			    "KEEP void gamma(void) { GAMMA_BODY(); }\n";

/* What the test programs are built into, once per run. */
static struct {
	int built; /* 1 built, -1 failed */
	char dir[64];
	char prog[128];	   /* -O2 -fomit-frame-pointer -g: .eh_frame */
	char prog_df[128]; /* -fno-asynchronous-unwind-tables -g: .debug_frame only */
	char lib[128];	   /* -shared -fPIC -fomit-frame-pointer */
} fx;

struct sample {
	struct ht_user_regs regs;
	uint8_t stack[STACK_COPY_BYTES];
	size_t stack_len;
};

struct child {
	pid_t pid;
	int to_child;	/* its stdin */
	int from_child; /* its stdout */
};

static int run_quiet(const char *cmd)
{
	int status = system(cmd);

	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

static int build_fixture(void)
{
	char cmd[1024];

	if (fx.built)
		return fx.built > 0 ? 0 : -1;
	fx.built = -1;
	signal(SIGPIPE, SIG_IGN);
	if (prog_make_dir(fx.dir, sizeof(fx.dir), "/tmp/ht-unwind-XXXXXX"))
		return -1;
	snprintf(fx.prog, sizeof(fx.prog), "%s/chain", fx.dir);
	snprintf(fx.prog_df, sizeof(fx.prog_df), "%s/chain_df", fx.dir);
	snprintf(fx.lib, sizeof(fx.lib), "%s/libgamma.so", fx.dir);
	if (prog_write_file(fx.dir, "capture.h", capture_h) ||
	    prog_write_file(fx.dir, "chain.c", chain_c) || prog_write_file(fx.dir, "lib.c", lib_c))
		return -1;
	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && cc " COMMON_CFLAGS " -g -o chain chain.c -ldl && "
		 "cc " COMMON_CFLAGS
		 " -fno-asynchronous-unwind-tables -g -o chain_df chain.c -ldl && "
		 "cc " COMMON_CFLAGS " -g -shared -fPIC -o libgamma.so lib.c",
		 fx.dir);
	if (run_quiet(cmd))
		return -1;
	fx.built = 1;
	return 0;
}

#define REQUIRE_FIXTURE() REQUIRE_BUILT(build_fixture)

static int spawn(struct child *c, char *const argv[])
{
	int in[2], out[2];

	if (pipe2(in, O_CLOEXEC))
		return -1;
	if (pipe2(out, O_CLOEXEC)) {
		close(in[0]);
		close(in[1]);
		return -1;
	}
	c->pid = fork();
	if (c->pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	c->to_child = in[1];
	c->from_child = out[0];
	if (c->pid > 0)
		return 0;
	close(in[1]);
	close(out[0]);
	return -1;
}

/* Let the child run to its end (its stdin closes), then reap it. */
static void child_end(struct child *c)
{
	if (c->pid <= 0)
		return;
	close(c->to_child);
	close(c->from_child);
	kill(c->pid, SIGKILL);
	waitpid(c->pid, NULL, 0);
	c->pid = 0;
}

static int read_full(int fd, void *buf, size_t len)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};
	size_t got = 0;

	while (got < len) {
		ssize_t n;

		if (poll(&p, 1, CHILD_TIMEOUT_MS) <= 0)
			return -1;
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int read_sample(struct child *c, struct sample *s)
{
	struct {
		uint64_t magic, abi, regs[HT_DWARF_SAMPLE_NREGS], stack_len;
	} h;

	if (read_full(c->from_child, &h, sizeof(h)) || h.magic != CAPTURE_MAGIC ||
	    h.stack_len > sizeof(s->stack))
		return -1;
	s->regs.abi = h.abi;
	memcpy(s->regs.regs, h.regs, sizeof(h.regs));
	s->stack_len = h.stack_len;
	return read_full(c->from_child, s->stack, s->stack_len);
}

/* Whether PID became a zombie within the child timeout. */
static int wait_for_zombie(int pid)
{
	char path[64], stat[256], state = 0;

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	for (int i = 0; i < CHILD_TIMEOUT_MS && state != 'Z'; i++) {
		FILE *f = fopen(path, "r");

		if (f && fgets(stat, sizeof(stat), f) && strrchr(stat, ')'))
			state = strrchr(stat, ')')[2];
		if (f)
			fclose(f);
		if (state != 'Z')
			usleep(1000);
	}
	return state == 'Z';
}

/* ---- symbols, with libdwfl's own lookup, from the files as built here ---- */

struct symbolizer {
	Dwfl *dwfl;
};

static int no_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
			const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
			char **debuginfo_file_name)
{
	(void)mod, (void)userdata, (void)modname, (void)base, (void)file_name;
	(void)debuglink_file, (void)debuglink_crc, (void)debuginfo_file_name;
	return -1;
}

static const Dwfl_Callbacks symbolizer_callbacks = {
	.find_debuginfo = no_debuginfo,
};

/* Where PID mapped the file named BASENAME (its offset-0 mapping), or 0. */
static uint64_t load_address(int pid, const char *basename)
{
	unsigned long long start = 0, end, offset;
	char path[64], line[1024], *name;
	uint64_t found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	while (f && !found && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		name = strrchr(line, '/');
		if (name && !strcmp(name + 1, basename) &&
		    sscanf(line, "%llx-%llx %*s %llx", &start, &end, &offset) == 3 && offset == 0)
			found = start;
	}
	if (f)
		fclose(f);
	return found;
}

/* Report FILE (as built here) where PID mapped its copy named BASENAME. */
static int symbolizer_add(struct symbolizer *sym, int pid, const char *file, const char *basename)
{
	uint64_t base = load_address(pid, basename);

	if (!sym->dwfl) {
		sym->dwfl = dwfl_begin(&symbolizer_callbacks);
		if (!sym->dwfl)
			return -1;
		dwfl_report_begin(sym->dwfl);
	} else {
		dwfl_report_begin_add(sym->dwfl);
	}
	if (!base || !dwfl_report_elf(sym->dwfl, basename, file, -1, base, false)) {
		dwfl_report_end(sym->dwfl, NULL, NULL);
		return -1;
	}
	return dwfl_report_end(sym->dwfl, NULL, NULL) ? -1 : 0;
}

/* The function frame I of IPS is in: return addresses are looked up one byte back. */
static const char *symbol_of(struct symbolizer *sym, const uint64_t *ips, int i)
{
	uint64_t pc = i > 0 ? ips[i] - 1 : ips[i];
	Dwfl_Module *mod = sym->dwfl ? dwfl_addrmodule(sym->dwfl, pc) : NULL;
	const char *name = mod ? dwfl_module_addrname(mod, pc) : NULL;

	return name ? name : "?";
}

static void symbolizer_free(struct symbolizer *sym)
{
	if (sym->dwfl)
		dwfl_end(sym->dwfl);
	sym->dwfl = NULL;
}

/* Whether the unwind reads gamma, beta, alpha, main from its frame FIRST on. */
static int is_chain(struct symbolizer *sym, const uint64_t *ips, int n, int first)
{
	static const char *const expected[] = {"beta", "alpha", "main"};

	if (n < first + 3 || strcmp(symbol_of(sym, ips, 0), "gamma"))
		return 0;
	for (int i = 0; i < 3; i++)
		if (strcmp(symbol_of(sym, ips, first + i), expected[i]))
			return 0;
	return 1;
}

static void print_unwind(struct symbolizer *sym, const uint64_t *ips, int n)
{
	for (int i = 0; i < n; i++)
		printf("     #%d 0x%llx %s\n", i, (unsigned long long)ips[i],
		       symbol_of(sym, ips, i));
}

/* Start PROG with ARG1 ARG2, read its sample; 0 or -1. */
static int start_chain(struct child *c, struct sample *s, const char *prog, const char *arg1,
		       const char *arg2)
{
	char *argv[] = {(char *)prog, (char *)arg1, (char *)arg2, NULL};

	if (spawn(c, argv))
		return -1;
	if (read_sample(c, s)) {
		child_end(c);
		return -1;
	}
	return 0;
}

static uint64_t next_random(uint64_t *state)
{
	*state ^= *state << 13;
	*state ^= *state >> 7;
	*state ^= *state << 17;
	return *state;
}

/* ---- tests ---------------------------------------------------------------- */

TEST(rejects_bad_arguments)
{
	struct ht_user_regs regs = {.abi = HT_DWARF_REGS_ABI_64};
	uint64_t ips[4];

	CHECK(!ht_dwarf_unwinder_new(0));
	CHECK(!ht_dwarf_unwinder_new(-1));
	CHECK(!ht_dwarf_unwinder_new(0x3ffffff0));
	CHECK(strstr(ht_last_error(), "/proc/") != NULL);
	CHECK(ht_dwarf_unwind(NULL, &regs, NULL, 0, ips, 4) == 0);
	CHECK(ht_dwarf_unwinder_refresh(NULL) == -1);
	ht_dwarf_unwinder_free(NULL);
	CHECK_EQ_U64(HT_DWARF_SAMPLE_REGS_MASK, 0xff01ff);
	CHECK_EQ_U64(__builtin_popcountll(HT_DWARF_SAMPLE_REGS_MASK), HT_DWARF_SAMPLE_NREGS);
}

TEST(unwinds_eh_frame_chain)
{
	static struct sample s;
	struct symbolizer sym = {0};
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES], again[MAX_FRAMES];
	struct child c;
	int n;

	REQUIRE_FIXTURE();
	CHECK(!start_chain(&c, &s, fx.prog, NULL, NULL));
	if (c.pid <= 0)
		return;
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	CHECK(!symbolizer_add(&sym, c.pid, fx.prog, "chain"));
	if (u) {
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(is_chain(&sym, ips, n, 1));
		CHECK_EQ_U64(ips[0], s.regs.regs[HT_DWARF_REG_IP]);
		/* main's callers are libc's start code, and _start ends the stack: a handful. */
		CHECK(n >= 4 && n <= 8);
		if (!is_chain(&sym, ips, n, 1) || getenv("HT_UNWIND_SHOW"))
			print_unwind(&sym, ips, n);

		/* Unchanged maps: refresh keeps everything. */
		CHECK(!ht_dwarf_unwinder_refresh(u));
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, again, MAX_FRAMES) == n);
		CHECK(!memcmp(ips, again, (size_t)n * sizeof(ips[0])));

		/* MAX_IPS bounds the walk. */
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, again, 2) == 2);
		CHECK_EQ_U64(again[1], ips[1]);
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, again, 0) == 0);

		/*
		 * Once the process is gone, a zombie first (empty maps), then reaped,
		 * refresh fails cleanly and the modules loaded still unwind.
		 */
		kill(c.pid, SIGKILL);
		CHECK(wait_for_zombie(c.pid));
		CHECK(ht_dwarf_unwinder_refresh(u) == -1);
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, again, MAX_FRAMES) == n);
		CHECK(!memcmp(ips, again, (size_t)n * sizeof(ips[0])));
		child_end(&c);
		CHECK(ht_dwarf_unwinder_refresh(u) == -1);
		CHECK(ht_last_error()[0] != '\0');
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, again, MAX_FRAMES) == n);
		CHECK(!memcmp(ips, again, (size_t)n * sizeof(ips[0])));
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
	symbolizer_free(&sym);
}

TEST(truncated_stack_gives_a_prefix)
{
	static struct sample s;
	struct ht_dwarf_unwinder *u;
	uint64_t full[MAX_FRAMES], ips[MAX_FRAMES];
	struct child c;
	int n_full, shortest = MAX_FRAMES;

	REQUIRE_FIXTURE();
	CHECK(!start_chain(&c, &s, fx.prog, NULL, NULL));
	if (c.pid <= 0)
		return;
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	if (u) {
		n_full = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, full, MAX_FRAMES);
		CHECK(n_full >= 4);
		/* Every length, even odd ones: each unwind is a prefix of the full one. */
		for (size_t len = 0; len <= s.stack_len; len += len < 512 ? 1 : 64) {
			int n = ht_dwarf_unwind(u, &s.regs, s.stack, len, ips, MAX_FRAMES);

			CHECK(n >= 1 && n <= n_full);
			CHECK(!memcmp(ips, full, (size_t)n * sizeof(ips[0])));
			if (n < shortest)
				shortest = n;
		}
		CHECK(shortest == 1);
		/* No stack at all: the sampled IP alone. */
		CHECK(ht_dwarf_unwind(u, &s.regs, NULL, 4096, ips, MAX_FRAMES) == 1);
		CHECK_EQ_U64(ips[0], s.regs.regs[HT_DWARF_REG_IP]);
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
}

TEST(garbage_registers_give_short_unwinds)
{
	static struct sample s;
	static uint8_t noise[STACK_COPY_BYTES];
	struct ht_dwarf_unwinder *u;
	struct ht_user_regs regs;
	uint64_t ips[MAX_FRAMES], seed = 0x9e3779b97f4a7c15ULL;
	struct child c;

	REQUIRE_FIXTURE();
	CHECK(!start_chain(&c, &s, fx.prog, NULL, NULL));
	if (c.pid <= 0)
		return;
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	for (size_t i = 0; i < sizeof(noise); i += 8) {
		uint64_t word = next_random(&seed);

		memcpy(noise + i, &word, 8);
	}
	for (int round = 0; u && round < 2000; round++) {
		const uint8_t *stack = round & 1 ? noise : s.stack;
		int n;

		regs = s.regs;
		/* Mostly random words; some rounds keep the real IP or SP to get further in. */
		for (int r = 0; r < HT_DWARF_SAMPLE_NREGS; r++)
			regs.regs[r] = next_random(&seed);
		if (round % 4 == 0)
			regs.regs[HT_DWARF_REG_IP] = s.regs.regs[HT_DWARF_REG_IP];
		if (round % 3 == 0)
			regs.regs[HT_DWARF_REG_SP] = s.regs.regs[HT_DWARF_REG_SP];
		n = ht_dwarf_unwind(u, &regs, stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(n >= 1 && n < MAX_FRAMES);
		CHECK_EQ_U64(ips[0], regs.regs[HT_DWARF_REG_IP]);
	}
	if (u) {
		regs = s.regs;
		regs.regs[HT_DWARF_REG_IP] = 0;
		CHECK(ht_dwarf_unwind(u, &regs, s.stack, s.stack_len, ips, MAX_FRAMES) == 0);
		regs = s.regs;
		regs.abi = HT_DWARF_REGS_ABI_NONE;
		CHECK(ht_dwarf_unwind(u, &regs, s.stack, s.stack_len, ips, MAX_FRAMES) == 0);
		regs.abi = HT_DWARF_REGS_ABI_32;
		CHECK(ht_dwarf_unwind(u, &regs, s.stack, s.stack_len, ips, MAX_FRAMES) == 1);
		/* The real IP with a stack pointer far from the copy: nothing to read. */
		regs = s.regs;
		regs.regs[HT_DWARF_REG_SP] = 0xfffffffffffffff8ULL;
		CHECK(ht_dwarf_unwind(u, &regs, s.stack, s.stack_len, ips, MAX_FRAMES) == 1);
	}
	ht_dwarf_unwinder_free(u);
	child_end(&c);
}

TEST(unwinds_debug_frame_chain)
{
	static struct sample s;
	struct symbolizer sym = {0};
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	Dwarf_Frame *frame = NULL;
	Dwarf_CFI *cfi;
	Dwarf_Addr bias;
	Dwfl_Module *mod;
	struct child c;
	int n;

	REQUIRE_FIXTURE();
	CHECK(!start_chain(&c, &s, fx.prog_df, NULL, NULL));
	if (c.pid <= 0)
		return;
	CHECK(!symbolizer_add(&sym, c.pid, fx.prog_df, "chain_df"));
	/* gamma must be described by .debug_frame alone, or this proves nothing. */
	mod = sym.dwfl ? dwfl_addrmodule(sym.dwfl, s.regs.regs[HT_DWARF_REG_IP]) : NULL;
	cfi = mod ? dwfl_module_eh_cfi(mod, &bias) : NULL;
	if (cfi && dwarf_cfi_addrframe(cfi, s.regs.regs[HT_DWARF_REG_IP] - bias, &frame) == 0) {
		free(frame);
		child_end(&c);
		symbolizer_free(&sym);
		SKIP_TEST("the compiler put gamma in .eh_frame despite "
			  "-fno-asynchronous-unwind-tables");
	}
	CHECK(mod && dwfl_module_dwarf_cfi(mod, &bias) != NULL);
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	if (u) {
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(is_chain(&sym, ips, n, 1));
		if (!is_chain(&sym, ips, n, 1) || getenv("HT_UNWIND_SHOW"))
			print_unwind(&sym, ips, n);
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
	symbolizer_free(&sym);
}

TEST(finds_library_loaded_after_refresh)
{
	static struct sample s;
	struct symbolizer sym = {0};
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char *argv[] = {fx.prog, "--dlopen", fx.lib, NULL};
	struct child c;
	int n;

	REQUIRE_FIXTURE();
	CHECK(!spawn(&c, argv));
	if (c.pid <= 0)
		return;
	/* Wait until the program is past exec, so the unwinder sees chain, not the test. */
	for (int i = 0; i < 1000 && !load_address(c.pid, "chain"); i++)
		usleep(1000);
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	CHECK(write(c.to_child, "g", 1) == 1);
	CHECK(!read_sample(&c, &s));
	CHECK(!symbolizer_add(&sym, c.pid, fx.prog, "chain"));
	CHECK(!symbolizer_add(&sym, c.pid, fx.lib, "libgamma.so"));
	if (u) {
		/* Before the refresh, gamma's code is in no module: no CFI to follow. */
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(n >= 1 && !is_chain(&sym, ips, n, 1));
		CHECK(!ht_dwarf_unwinder_refresh(u));
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(is_chain(&sym, ips, n, 1));
		if (!is_chain(&sym, ips, n, 1) || getenv("HT_UNWIND_SHOW"))
			print_unwind(&sym, ips, n);
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
	symbolizer_free(&sym);
}

/* Where PID's [vdso] lies; 0 when it has none. */
static int vdso_range(int pid, uint64_t *start, uint64_t *end)
{
	unsigned long long s = 0, e = 0;
	char path[64], line[512];
	int found = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	f = fopen(path, "r");
	while (f && !found && fgets(line, sizeof(line), f))
		found = strstr(line, "[vdso]") && sscanf(line, "%llx-%llx", &s, &e) == 2;
	if (f)
		fclose(f);
	*start = s;
	*end = e;
	return found;
}

/* NAME's offset in our own vdso (the same image as every process's), or 0. */
static uint64_t vdso_symbol_offset(const char *name)
{
	char *image = (char *)getauxval(AT_SYSINFO_EHDR);
	uint64_t offset = 0, start, end;
	Elf_Scn *scn = NULL;
	Elf *elf = NULL;

	elf_version(EV_CURRENT);
	if (image && vdso_range(getpid(), &start, &end) && start == (uintptr_t)image)
		elf = elf_memory(image, end - start);
	while (elf && !offset && (scn = elf_nextscn(elf, scn))) {
		GElf_Shdr shdr;
		Elf_Data *data;
		GElf_Sym sym;

		if (!gelf_getshdr(scn, &shdr) || shdr.sh_type != SHT_DYNSYM ||
		    !(data = elf_getdata(scn, NULL)))
			continue;
		for (size_t i = 0; shdr.sh_entsize && i < shdr.sh_size / shdr.sh_entsize; i++) {
			const char *sym_name;

			if (!gelf_getsym(data, (int)i, &sym))
				break;
			sym_name = elf_strptr(elf, shdr.sh_link, sym.st_name);
			if (sym_name && !strcmp(sym_name, name) && sym.st_value) {
				offset = sym.st_value;
				break;
			}
		}
	}
	if (elf)
		elf_end(elf);
	return offset;
}

/*
 * A sample taken on the first instruction of the vdso's clock_gettime,
 * called from gamma: the vdso has no file, its CFI comes from its image.
 */
TEST(unwinds_through_the_vdso)
{
	static struct sample s, in_vdso;
	struct ht_dwarf_unwinder *u;
	uint64_t real[MAX_FRAMES], ips[MAX_FRAMES], entry, gamma_ip, start, end;
	uint64_t offset = vdso_symbol_offset("__vdso_clock_gettime");
	struct child c;
	int n_real, n;

	if (!offset)
		SKIP_TEST("no __vdso_clock_gettime in this vdso");
	REQUIRE_FIXTURE();
	CHECK(!start_chain(&c, &s, fx.prog, NULL, NULL));
	if (c.pid <= 0)
		return;
	CHECK(vdso_range(c.pid, &start, &end));
	entry = start + offset;
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	if (u) {
		n_real = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, real, MAX_FRAMES);
		/* As if gamma had just called it: its IP pushed as the return address. */
		gamma_ip = s.regs.regs[HT_DWARF_REG_IP];
		in_vdso.regs = s.regs;
		in_vdso.regs.regs[HT_DWARF_REG_IP] = entry;
		in_vdso.regs.regs[HT_DWARF_REG_SP] -= 8;
		memcpy(in_vdso.stack, &gamma_ip, 8);
		in_vdso.stack_len =
			s.stack_len < sizeof(s.stack) - 8 ? s.stack_len + 8 : sizeof(s.stack);
		memcpy(in_vdso.stack + 8, s.stack, in_vdso.stack_len - 8);
		n = ht_dwarf_unwind(u, &in_vdso.regs, in_vdso.stack, in_vdso.stack_len, ips,
				    MAX_FRAMES);
		CHECK(n == n_real + 1);
		CHECK_EQ_U64(ips[0], entry);
		CHECK(n > 1 && !memcmp(ips + 1, real, (size_t)(n - 1) * sizeof(ips[0])));
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
}

/* Drop the capabilities that open /proc/PID/map_files, as a non-root hybtrace lacks them. */
static int drop_map_files_caps(void)
{
	struct __user_cap_header_struct header = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &header, data))
		return -1;
	data[CAP_SYS_ADMIN / 32].effective &= ~(1u << (CAP_SYS_ADMIN % 32));
	data[CAP_CHECKPOINT_RESTORE / 32].effective &= ~(1u << (CAP_CHECKPOINT_RESTORE % 32));
	return (int)syscall(SYS_capset, &header, data);
}

/* The pid (in our namespace) of PARENT's child named COMM, or 0. */
static int child_named(int parent, const char *comm)
{
	DIR *proc = opendir("/proc");
	struct dirent *e;
	int found = 0;

	while (proc && !found && (e = readdir(proc))) {
		char path[300], stat[512], name[64];
		int pid = atoi(e->d_name), ppid;
		FILE *f;

		if (pid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/%d/stat", pid);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(stat, sizeof(stat), f) &&
		    sscanf(stat, "%*d (%63[^)]) %*c %d", name, &ppid) == 2 && ppid == parent &&
		    !strcmp(name, comm))
			found = pid;
		fclose(f);
	}
	if (proc)
		closedir(proc);
	return found;
}

/* In a child without map_files access: the unwind must match EXPECTED through /proc/PID/root. */
static int unwinds_through_root(int pid, const struct sample *s, const uint64_t *expected, int n)
{
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char path[64];
	pid_t child = fork();
	int status, fd;

	if (child == 0) {
		if (drop_map_files_caps())
			_exit(2);
		/* Proof that map_files is closed to us now: the fallback is what works. */
		snprintf(path, sizeof(path), "/proc/%d/map_files", pid);
		fd = open(path, O_RDONLY | O_DIRECTORY);
		if (fd >= 0) {
			DIR *d = fdopendir(fd);
			struct dirent *e;

			while (d && (e = readdir(d)))
				if (e->d_name[0] != '.' && openat(fd, e->d_name, O_RDONLY) >= 0)
					_exit(3);
		}
		u = ht_dwarf_unwinder_new(pid);
		if (!u)
			_exit(4);
		if (ht_dwarf_unwind(u, &s->regs, s->stack, s->stack_len, ips, MAX_FRAMES) != n ||
		    memcmp(ips, expected, (size_t)n * sizeof(ips[0])))
			_exit(5);
		ht_dwarf_unwinder_free(u);
		_exit(0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Root is what CI runs as: there a test that needs it fails rather than skips. */
#define REQUIRE_NAMESPACES()                                                                       \
	do {                                                                                       \
		const char *ci_ = getenv("CI");                                                    \
		if (geteuid() != 0 && ci_ && !strcmp(ci_, "true")) {                               \
			printf("FAIL %s: needs root (CI=true)\n", ht_current_name);                \
			ht_current_failed = 1;                                                     \
			return;                                                                    \
		}                                                                                  \
		if (geteuid() != 0)                                                                \
			SKIP_TEST("needs root for mount and pid namespaces");                      \
		if (run_quiet("unshare --mount --pid --fork --mount-proc true 2>/dev/null"))       \
			SKIP_TEST("unshare --mount --pid --fork --mount-proc does not work here"); \
	} while (0)

TEST(opens_files_in_the_target_namespace)
{
	static struct sample s;
	struct symbolizer sym = {0};
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char mnt[128], script[1024], inside[160];
	struct child c;
	int target = 0, n = 0;

	REQUIRE_NAMESPACES();
	REQUIRE_FIXTURE();
	snprintf(mnt, sizeof(mnt), "%s/ns", fx.dir);
	snprintf(inside, sizeof(inside), "%s/chain_ns", mnt);
	CHECK(!mkdir(mnt, 0755));
	/* The tmpfs, and the copy of the program in it, exist only inside the namespace. */
	snprintf(script, sizeof(script), "mount -t tmpfs none '%s' && cp '%s' '%s' && exec '%s'",
		 mnt, fx.prog, inside, inside);
	char *argv[] = {"unshare", "--mount", "--pid", "--fork", "--mount-proc",
			"sh",	   "-c",      script,  NULL};
	CHECK(!spawn(&c, argv));
	if (c.pid <= 0)
		return;
	CHECK(!read_sample(&c, &s));
	target = child_named(c.pid, "chain_ns");
	CHECK(target > 0);
	CHECK(access(inside, F_OK) == -1);
	CHECK(load_address(target, "chain_ns") != 0);
	/* Symbols from the original: the copy is the same file. */
	CHECK(!symbolizer_add(&sym, target, fx.prog, "chain_ns"));
	u = target > 0 ? ht_dwarf_unwinder_new(target) : NULL;
	CHECK(u != NULL);
	if (u) {
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(is_chain(&sym, ips, n, 1));
		if (!is_chain(&sym, ips, n, 1) || getenv("HT_UNWIND_SHOW"))
			print_unwind(&sym, ips, n);
		ht_dwarf_unwinder_free(u);
		/* And without map_files (no CAP_SYS_ADMIN): through /proc/PID/root. */
		CHECK_EQ_U64(unwinds_through_root(target, &s, ips, n), 0);
	}
	child_end(&c);
	symbolizer_free(&sym);
}

/*
 * Whether anything opens the FIFO at PATH for reading while it is watched: a
 * writer that does not wait sees a reader (ENXIO means none), and its open
 * releases a reader blocked in open(), so a broken unwinder fails the test
 * instead of hanging it.
 */
struct fifo_watch {
	const char *path;
	int stop;
	int opened;
	pthread_t thread;
};

static void *watch_fifo(void *arg)
{
	struct fifo_watch *w = arg;

	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		int fd = open(w->path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);

		if (fd >= 0) {
			__atomic_store_n(&w->opened, 1, __ATOMIC_RELEASE);
			close(fd);
		}
		usleep(1000);
	}
	return NULL;
}

static int fifo_watch_start(struct fifo_watch *w, const char *path)
{
	*w = (struct fifo_watch){.path = path};
	return pthread_create(&w->thread, NULL, watch_fifo, w) ? -1 : 0;
}

/* Whether the FIFO was opened for reading. */
static int fifo_watch_stop(struct fifo_watch *w)
{
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELEASE);
	pthread_join(w->thread, NULL);
	return w->opened;
}

/* In a child without map_files access: a new unwinder of PID, and an unwind of S. */
static int unwinds_without_map_files(int pid, const struct sample *s)
{
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	pid_t child = fork();
	int status;

	if (child == 0) {
		if (drop_map_files_caps())
			_exit(2);
		u = ht_dwarf_unwinder_new(pid);
		if (!u)
			_exit(4);
		if (ht_dwarf_unwind(u, &s->regs, s->stack, s->stack_len, ips, MAX_FRAMES) < 1)
			_exit(5);
		ht_dwarf_unwinder_free(u);
		_exit(0);
	}
	if (child < 0 || waitpid(child, &status, 0) != child)
		return -1;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/*
 * Without map_files a mapped file is opened by its path in the target's
 * root. The target covers its program with a symlink to a FIFO, an absolute
 * path that names a file of ours: the unwinder must not open it.
 */
TEST(mapped_file_covered_by_a_symlink_is_not_followed_out)
{
	static struct sample s;
	char mnt[128], script[1024], inside[160], canary[160], cmd[1024];
	struct fifo_watch watch;
	struct child c;
	int target;

	REQUIRE_NAMESPACES();
	REQUIRE_FIXTURE();
	snprintf(mnt, sizeof(mnt), "%s/ns_covered", fx.dir);
	snprintf(inside, sizeof(inside), "%s/chain_ns", mnt);
	snprintf(canary, sizeof(canary), "%s/covered_canary.fifo", fx.dir);
	CHECK(!mkdir(mnt, 0755));
	CHECK(!mkfifo(canary, 0600));
	snprintf(script, sizeof(script), "mount -t tmpfs none '%s' && cp '%s' '%s' && exec '%s'",
		 mnt, fx.prog, inside, inside);
	char *argv[] = {"unshare", "--mount", "--pid", "--fork", "--mount-proc",
			"sh",	   "-c",      script,  NULL};
	CHECK(!spawn(&c, argv));
	if (c.pid <= 0)
		return;
	CHECK(!read_sample(&c, &s));
	target = child_named(c.pid, "chain_ns");
	CHECK(target > 0);
	/* Mapped, and now its path leads elsewhere: maps still names the covered file. */
	snprintf(cmd, sizeof(cmd),
		 "nsenter -t %d -m sh -c \"mount -t tmpfs none '%s' && ln -s '%s' '%s'\"", target,
		 mnt, canary, inside);
	CHECK(!run_quiet(cmd));
	if (target > 0 && !fifo_watch_start(&watch, canary)) {
		CHECK_EQ_U64(unwinds_without_map_files(target, &s), 0);
		CHECK(!fifo_watch_stop(&watch));
	}
	child_end(&c);
}

/* The hex build-id of FILE into HEX, or -1. */
static int build_id_of(const char *file, char *hex, size_t len)
{
	const void *id = NULL;
	ssize_t id_len = -1;
	int fd = open(file, O_RDONLY);
	Elf *elf;

	elf_version(EV_CURRENT);
	elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
	if (elf)
		id_len = dwelf_elf_gnu_build_id(elf, &id);
	for (ssize_t i = 0; i < id_len && (size_t)(2 * i + 2) < len; i++)
		snprintf(hex + 2 * i, 3, "%02x", ((const unsigned char *)id)[i]);
	if (elf)
		elf_end(elf);
	if (fd >= 0)
		close(fd);
	return id_len >= 2 ? 0 : -1;
}

/*
 * A program stripped of its .debug_frame and built without .eh_frame for its
 * own code: its CFI is only in a separate debug file, found by build-id in the
 * target's /usr/lib/debug (a tmpfs there, inside a mount namespace).
 */
/* chain_split, whose CFI is in chain_split.debug alone; HEX gets its build-id. */
static int build_split(char *hex, size_t len)
{
	char cmd[1024];

	snprintf(cmd, sizeof(cmd),
		 "cd '%s' && cc " COMMON_CFLAGS " -fno-asynchronous-unwind-tables -g "
		 "-o chain_split chain.c -ldl && "
		 "objcopy --only-keep-debug chain_split chain_split.debug && "
		 "strip --strip-debug chain_split",
		 fx.dir);
	if (run_quiet(cmd))
		return -1;
	snprintf(cmd, sizeof(cmd), "%s/chain_split", fx.dir);
	return build_id_of(cmd, hex, len);
}

TEST(finds_debug_file_by_build_id)
{
	static struct sample s;
	struct symbolizer sym = {0};
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char cmd[1024], hex[129], script[1024], debug_file[256];
	Dwarf_Frame *frame = NULL;
	Dwfl_Module *mod;
	Dwarf_CFI *cfi;
	Dwarf_Addr bias;
	struct child c;
	int n;

	REQUIRE_NAMESPACES();
	if (access("/usr/lib/debug", F_OK))
		SKIP_TEST("no /usr/lib/debug to mount the target's debug files over");
	REQUIRE_FIXTURE();
	if (build_split(hex, sizeof(hex)))
		SKIP_TEST("cannot split debug info with objcopy and strip");
	snprintf(cmd, sizeof(cmd), "%s/chain_split", fx.dir);
	snprintf(debug_file, sizeof(debug_file), "/usr/lib/debug/.build-id/%.2s/%s.debug", hex,
		 hex + 2);
	CHECK(access(debug_file, F_OK) == -1);
	snprintf(script, sizeof(script),
		 "mount -t tmpfs none /usr/lib/debug && mkdir -p /usr/lib/debug/.build-id/%.2s && "
		 "cp '%s/chain_split.debug' '%s' && exec '%s/chain_split'",
		 hex, fx.dir, debug_file, fx.dir);
	char *argv[] = {"unshare", "--mount", "sh", "-c", script, NULL};
	CHECK(!spawn(&c, argv));
	if (c.pid <= 0)
		return;
	CHECK(!read_sample(&c, &s));
	CHECK(!symbolizer_add(&sym, c.pid, cmd, "chain_split"));
	/* Neither .eh_frame nor the stripped file may describe gamma. */
	mod = sym.dwfl ? dwfl_addrmodule(sym.dwfl, s.regs.regs[HT_DWARF_REG_IP]) : NULL;
	cfi = mod ? dwfl_module_eh_cfi(mod, &bias) : NULL;
	CHECK(mod != NULL);
	CHECK(!cfi || dwarf_cfi_addrframe(cfi, s.regs.regs[HT_DWARF_REG_IP] - bias, &frame) != 0);
	free(frame);
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	if (u) {
		n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
		CHECK(is_chain(&sym, ips, n, 1));
		if (!is_chain(&sym, ips, n, 1) || getenv("HT_UNWIND_SHOW"))
			print_unwind(&sym, ips, n);
		ht_dwarf_unwinder_free(u);
	}
	child_end(&c);
	symbolizer_free(&sym);
}

/*
 * The target's debug file is an absolute symlink to a FIFO of ours, which its
 * own mount namespace does not show: resolved in its root, it names nothing.
 */
TEST(debug_file_symlink_out_of_the_root_is_not_followed)
{
	static struct sample s;
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char hex[129], script[2048], outside[128], canary[160];
	struct fifo_watch watch;
	struct child c;

	REQUIRE_NAMESPACES();
	if (access("/usr/lib/debug", F_OK))
		SKIP_TEST("no /usr/lib/debug to mount the target's debug files over");
	REQUIRE_FIXTURE();
	if (build_split(hex, sizeof(hex)))
		SKIP_TEST("cannot split debug info with objcopy and strip");
	snprintf(outside, sizeof(outside), "%s/outside", fx.dir);
	snprintf(canary, sizeof(canary), "%s/canary.fifo", outside);
	CHECK(!mkdir(outside, 0755));
	CHECK(!mkfifo(canary, 0600));
	snprintf(script, sizeof(script),
		 "mount -t tmpfs none /usr/lib/debug && mkdir -p /usr/lib/debug/.build-id/%.2s && "
		 "ln -s '%s' /usr/lib/debug/.build-id/%.2s/%s.debug && "
		 "mount -t tmpfs none '%s' && exec '%s/chain_split'",
		 hex, canary, hex, hex + 2, outside, fx.dir);
	char *argv[] = {"unshare", "--mount", "sh", "-c", script, NULL};
	CHECK(!spawn(&c, argv));
	if (c.pid <= 0)
		return;
	CHECK(!read_sample(&c, &s));
	CHECK(!fifo_watch_start(&watch, canary));
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	/* gamma's CFI is nowhere now: the sampled IP alone, or what libdw guesses. */
	if (u)
		CHECK(ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES) >= 1);
	ht_dwarf_unwinder_free(u);
	CHECK(!fifo_watch_stop(&watch));
	child_end(&c);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Unwinds per second on one core for a ~24-frame stack. Quiet unless too
 * slow; HT_UNWIND_BENCH=1 prints the rate.
 */
TEST(unwinds_fast_enough)
{
	/*
	 * Not a speed target (make bench has those): a floor a loaded 2-core
	 * guest clears several times over (15-21k/s idle, 1.7k/s under ASan
	 * next to two compilers), which an unwinder that reopened its files or
	 * re-indexed their CFI at every call would not.
	 */
#if defined(__SANITIZE_ADDRESS__)
	const double min_per_s = 400; /* our code instrumented; libdw is not */
#else
	const double min_per_s = 2500;
#endif
	static struct sample s;
	struct ht_dwarf_unwinder *u;
	uint64_t ips[MAX_FRAMES];
	char depth[16];
	struct child c;
	double start, elapsed, refresh_s;
	long count = 0;
	int n = 0;

	REQUIRE_FIXTURE();
	snprintf(depth, sizeof(depth), "%d", DEEP_FRAMES);
	CHECK(!start_chain(&c, &s, fx.prog, "--deep", depth));
	if (c.pid <= 0)
		return;
	u = ht_dwarf_unwinder_new(c.pid);
	CHECK(u != NULL);
	if (!u) {
		child_end(&c);
		return;
	}
	/* The first unwind opens the files and indexes their CFI; time the steady state. */
	n = ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips, MAX_FRAMES);
	CHECK(n >= DEEP_FRAMES + 4);
	start = now_s();
	do {
		for (int i = 0; i < 1000; i++)
			count += ht_dwarf_unwind(u, &s.regs, s.stack, s.stack_len, ips,
						 MAX_FRAMES) == n;
		elapsed = now_s() - start;
	} while (elapsed < 0.3);
	start = now_s();
	for (int i = 0; i < 1000; i++)
		CHECK(!ht_dwarf_unwinder_refresh(u));
	refresh_s = (now_s() - start) / 1000;
	if (count / elapsed < min_per_s || getenv("HT_UNWIND_BENCH"))
		printf("     %.0f unwinds/s of %d frames (want >= %.0f); unchanged refresh %.1f "
		       "us\n",
		       count / elapsed, n, min_per_s, refresh_s * 1e6);
	CHECK(count / elapsed >= min_per_s);
	ht_dwarf_unwinder_free(u);
	child_end(&c);
}
