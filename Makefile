# hybtrace: one entry point. `make`, `make test`, `make demo`, `make install`.
VERSION := 0.1.0

PREFIX ?= /usr/local
DESTDIR ?=
BUILD := build
BPFTOOL ?= bpftool
CLANG ?= clang
CC ?= gcc
BTF_FILE ?= /sys/kernel/btf/vmlinux

# Debian 12 packages the build, the tests and the demo need.
# lld: ld.lld for the stop function's clang -flto test; libc6-dbg: libc's debug file, which
# the symbolizer tests read; postgresql-15: postgres, initdb and pgbench for the acceptance
# checks of the dump policy and of whole services (tests/integration/test_postgres.py);
# nginx: the preforking web server of the services' acceptance check (test_nginx.py).
DEB_PACKAGES := make gcc clang llvm libbpf-dev bpftool libelf-dev libdw-dev libipt-dev \
	zlib1g-dev pkg-config protobuf-compiler python3 libclang-rt-14-dev binutils libcap2-bin \
	lld libc6-dbg postgresql-15 nginx systemd util-linux

# `make V=1` shows every command.
ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

CFLAGS ?= -O2 -g
WARNINGS := -Wall -Wextra -Werror -Wno-missing-field-initializers
CPPFLAGS_ALL := -D_GNU_SOURCE -DHT_VERSION='"$(VERSION)"' -Iinclude -Iuserspace -I$(BUILD)
LDLIBS := -lbpf -ldw -lelf -lz -lpthread -lipt

BPF_SRCS := $(wildcard bpf/*.bpf.c)
BPF_OBJS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(BPF_SRCS))
SKELS := $(patsubst bpf/%.bpf.c,$(BUILD)/%.skel.h,$(BPF_SRCS))

# Every user-space file but main.c goes into a library the unit tests link too.
# The folders are the layers (README "Architecture"); tests/layers.sh checks their includes.
# Every folder under sources/ is one source (sources/source.h is their interface).
USERSPACE_DIRS := base trace symbols kernel sources \
	$(patsubst userspace/%/,%,$(sort $(wildcard userspace/sources/*/))) triggers dump cli
LIB_SRCS := $(foreach d,$(USERSPACE_DIRS),$(wildcard userspace/$(d)/*.c))
USERSPACE_HDRS := $(foreach d,$(USERSPACE_DIRS),$(wildcard userspace/$(d)/*.h))
LIB_OBJS := $(patsubst userspace/%.c,$(BUILD)/obj/%.o,$(LIB_SRCS))
GENERATED := $(BUILD)/syscall_table.h $(SKELS)

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))
# The same unit tests under AddressSanitizer and UndefinedBehaviorSanitizer.
ASAN := $(BUILD)/asan
ASAN_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
ASAN_LIB_OBJS := $(patsubst userspace/%.c,$(ASAN)/obj/%.o,$(LIB_SRCS))
ASAN_UNIT_BINS := $(patsubst tests/unit/%.c,$(ASAN)/tests/%,$(UNIT_SRCS))
WORKLOAD_SRCS := $(wildcard tests/workloads/*.c)
WORKLOAD_BINS := $(patsubst tests/workloads/%.c,$(BUILD)/workloads/%,$(WORKLOAD_SRCS))

.SECONDARY: $(BPF_OBJS) $(GENERATED)
.PHONY: all deps bench-deps kernel-deps test test-kernels unit demo install uninstall clean format bench bench-smoke soak

all: $(BUILD)/hybtrace

deps:
	@missing=""; for p in $(DEB_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(BUILD) $(BUILD)/obj $(BUILD)/tests $(BUILD)/workloads $(ASAN)/obj $(ASAN)/tests:
	mkdir -p $@

$(BUILD)/vmlinux.h: | $(BUILD)
	@test -r $(BTF_FILE) || { echo "error: $(BTF_FILE) is missing: the kernel needs CONFIG_DEBUG_INFO_BTF=y (or set BTF_FILE=PATH)" >&2; exit 1; }
	$(call msg,BTF,$@)
	$(Q)$(BPFTOOL) btf dump file $(BTF_FILE) format c > $@.tmp && mv $@.tmp $@

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.bpf.h) include/hybtrace/records.h \
		include/hybtrace/block_stack.h $(BUILD)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 -Wall -Werror \
		-Iinclude -I$(BUILD) -c $< -o $@
	$(Q)llvm-strip -g $@

$(BUILD)/%.skel.h: $(BUILD)/%.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $*_bpf > $@.tmp && mv $@.tmp $@

# Syscall names from the installed kernel headers, so the table matches the ABI.
$(BUILD)/syscall_table.h: /usr/include/x86_64-linux-gnu/asm/unistd_64.h | $(BUILD)
	$(call msg,GEN,$@)
	$(Q)awk '/^#define __NR_/ { sub("__NR_", "", $$2); printf "\t[%s] = \"%s\",\n", $$3, $$2 }' $< > $@.tmp && mv $@.tmp $@

$(BUILD)/obj/%.o: userspace/%.c $(USERSPACE_HDRS) $(wildcard include/hybtrace/*.h) $(GENERATED)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS) $(WARNINGS) -c $< -o $@

$(BUILD)/libhybtrace.a: $(LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/hybtrace: $(BUILD)/obj/main.o $(BUILD)/libhybtrace.a
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -o $@ $^ $(LDLIBS)

# The tests' own library: the PT synthesizer and the PT test programs' build (tests/pt),
# linked by the unit tests that single-step programs and by the decode benchmark; sh(); the
# timelines and files the tests of the Perfetto writer and reader share; the flight-recorder
# windows the tests of the kernel side build by hand; building small programs at run time and
# driving them on pipes; the programs the trigger tests run.
TEST_LIB_SRCS := tests/unit/sh.c tests/pt/pt_synth.c tests/pt/pt_programs.c \
	tests/unit/trace_fixtures.c tests/unit/window_fixtures.c tests/unit/programs.c \
	tests/unit/trigger_programs.c
TEST_LIB_HDRS := tests/unit/sh.h tests/pt/pt_synth.h tests/pt/pt_programs.h \
	tests/unit/trace_fixtures.h tests/unit/window_fixtures.h tests/unit/programs.h \
	tests/unit/trigger_programs.h
TEST_LIB_OBJS = $(patsubst tests/%.c,$(1)/tests/obj/%.o,$(TEST_LIB_SRCS))
UNIT_DEPS := tests/unit/check.h $(TEST_LIB_HDRS)
UNIT_CPPFLAGS := $(CPPFLAGS_ALL) -Itests/unit -Itests/pt

$(BUILD)/tests/obj/%.o: tests/%.c $(TEST_LIB_HDRS) $(USERSPACE_HDRS) $(GENERATED)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNIT_CPPFLAGS) $(CFLAGS) $(WARNINGS) -c $< -o $@

$(BUILD)/tests/libhttest.a: $(call TEST_LIB_OBJS,$(BUILD))
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/tests/%: tests/unit/%.c $(UNIT_DEPS) $(BUILD)/tests/libhttest.a $(BUILD)/libhybtrace.a \
		| $(BUILD)/tests
	$(call msg,TEST,$@)
	$(Q)$(CC) $(UNIT_CPPFLAGS) $(CFLAGS) $(WARNINGS) -o $@ $< $(BUILD)/tests/libhttest.a \
		$(BUILD)/libhybtrace.a $(LDLIBS)

$(ASAN)/obj/%.o: userspace/%.c $(USERSPACE_HDRS) $(wildcard include/hybtrace/*.h) $(GENERATED)
	$(call msg,CC-ASAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(CPPFLAGS_ALL) $(ASAN_CFLAGS) $(WARNINGS) -c $< -o $@

$(ASAN)/libhybtrace.a: $(ASAN_LIB_OBJS)
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

# hybtrace itself under the sanitizers, for the soak test's leak check.
$(ASAN)/hybtrace: $(ASAN)/obj/main.o $(ASAN)/libhybtrace.a
	$(call msg,LINK-ASAN,$@)
	$(Q)$(CC) $(ASAN_CFLAGS) -o $@ $^ $(LDLIBS)

$(ASAN)/tests/obj/%.o: tests/%.c $(TEST_LIB_HDRS) $(USERSPACE_HDRS) $(GENERATED)
	$(call msg,CC-ASAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNIT_CPPFLAGS) $(ASAN_CFLAGS) $(WARNINGS) -c $< -o $@

$(ASAN)/tests/libhttest.a: $(call TEST_LIB_OBJS,$(ASAN))
	$(call msg,AR,$@)
	$(Q)rm -f $@ && ar rcs $@ $^

$(ASAN)/tests/%: tests/unit/%.c $(UNIT_DEPS) $(ASAN)/tests/libhttest.a $(ASAN)/libhybtrace.a \
		| $(ASAN)/tests
	$(call msg,TEST-ASAN,$@)
	$(Q)$(CC) $(UNIT_CPPFLAGS) $(ASAN_CFLAGS) $(WARNINGS) -o $@ $< $(ASAN)/tests/libhttest.a \
		$(ASAN)/libhybtrace.a $(LDLIBS)

# Workloads: built without optimisation surprises, with frame pointers.
$(BUILD)/workloads/%: tests/workloads/%.c tests/workloads/workload.h | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -D_GNU_SOURCE -O2 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -Iinclude -o $@ $< -lpthread $(LDLIBS_WORKLOAD)

# The same call structure without frame pointers, for DWARF unwinding.
$(BUILD)/workloads/callstack_nofp: tests/workloads/callstack.c tests/workloads/workload.h | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -D_GNU_SOURCE -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror -Iinclude -o $@ $< -lpthread
WORKLOAD_BINS += $(BUILD)/workloads/callstack_nofp

# And without any CFI of its own (no .eh_frame, no -g): unwinding it asks for a separate debug file.
$(BUILD)/workloads/callstack_nocfi: tests/workloads/callstack.c tests/workloads/workload.h | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -D_GNU_SOURCE -O2 -fomit-frame-pointer -fno-asynchronous-unwind-tables -fno-unwind-tables -Wall -Wextra -Werror -Iinclude -o $@ $< -lpthread
WORKLOAD_BINS += $(BUILD)/workloads/callstack_nocfi

# A mutex convoy without frame pointers: a frame-pointer walk of its waits stops short.
$(BUILD)/workloads/mutex_convoy_nofp: tests/workloads/mutex_convoy.c tests/workloads/workload.h | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -D_GNU_SOURCE -O2 -g -fomit-frame-pointer -Wall -Wextra -Werror -Iinclude -o $@ $< -lpthread
WORKLOAD_BINS += $(BUILD)/workloads/mutex_convoy_nofp

# procs_spin's two other programs: the same source, functions of other names.
$(BUILD)/workloads/procs_spin_%: tests/workloads/procs_spin.c tests/workloads/workload.h | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -D_GNU_SOURCE -DROLE=$* -O2 -g -fno-omit-frame-pointer -Wall -Wextra -Werror -Iinclude -o $@ $< -lpthread
WORKLOAD_BINS += $(BUILD)/workloads/procs_spin_beta $(BUILD)/workloads/procs_spin_gamma
$(BUILD)/workloads/procs_spin: $(BUILD)/workloads/procs_spin_beta $(BUILD)/workloads/procs_spin_gamma

# The library trigger_target loads with dlopen; not a program of its own.
WORKLOAD_BINS := $(filter-out $(BUILD)/workloads/libtrig,$(WORKLOAD_BINS)) $(BUILD)/workloads/libtrig.so
$(BUILD)/workloads/libtrig.so: tests/workloads/libtrig.c | $(BUILD)/workloads
	$(call msg,WORKLOAD,$@)
	$(Q)$(CC) -O2 -g -shared -fPIC -Wall -Wextra -Werror -o $@ $<

$(BUILD)/workloads/trigger_target: LDLIBS_WORKLOAD := -ldl

unit: $(UNIT_BINS) $(ASAN_UNIT_BINS)

test: deps bench-deps kernel-deps
	$(MAKE) all unit $(ASAN)/hybtrace $(WORKLOAD_BINS) fuzz-targets $(BENCH_BINS) \
		$(KERNEL_BINS)
	tests/run

# The kernel matrix: hybtrace's scenarios on the kernels users run (tests/kernels/kernels.list),
# each booted under qemu from its Debian package (cached in build/kernels/, nothing installed
# in /boot), and on the running kernel. `make test-kernels KERNELS=6.1-rt ONLY=syscall`
# narrows it; tests/run runs it with the known defects as expected failures.
KERNEL_PACKAGES := qemu-system-x86
KERNEL_BINS := $(BUILD)/kernels/ht_port

kernel-deps: deps
	@missing=""; for p in $(KERNEL_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
			--no-install-recommends $$missing; \
	fi

$(BUILD)/kernels:
	mkdir -p $@

# The guest's channel to the host: static, the initramfs has no libc of its own for it.
$(BUILD)/kernels/ht_port: tests/kernels/ht_port.c | $(BUILD)/kernels
	$(call msg,CC,$@)
	$(Q)$(CC) -static -O2 $(WARNINGS) -o $@ $<

test-kernels: kernel-deps
	$(MAKE) all $(WORKLOAD_BINS) $(KERNEL_BINS)
	python3 tests/kernels/matrix.py $(if $(KERNELS),--kernels $(KERNELS)) $(if $(ONLY),--only $(ONLY))

demo: deps
	$(MAKE) all $(BUILD)/workloads/demo_service
	tests/demo.sh

# The benchmark: hybtrace next to the tools a user would pick instead, in one run.
BENCH_PACKAGES := bpftrace linux-perf
BENCH_BINS := $(BUILD)/bench/empty_progs $(BUILD)/bench/mark_bench $(BUILD)/bench/bench_decode \
	$(BUILD)/bench/bench_symbols

bench-deps: deps
	@missing=""; for p in $(BENCH_PACKAGES); do \
		dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q '^install ok installed' \
			|| missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
		echo "installing:$$missing"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi

$(BUILD)/bench:
	mkdir -p $@

$(BUILD)/bench/empty.bpf.o: tests/bench/empty.bpf.c $(BUILD)/vmlinux.h | $(BUILD)/bench
	$(call msg,BPF,$@)
	$(Q)$(CLANG) -g -O2 -target bpf -D__TARGET_ARCH_x86 -Wall -Werror -I$(BUILD) -c $< -o $@
	$(Q)llvm-strip -g $@

$(BUILD)/bench/empty.skel.h: $(BUILD)/bench/empty.bpf.o
	$(call msg,GEN-SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name empty_bpf > $@.tmp && mv $@.tmp $@

$(BUILD)/bench/empty_progs: tests/bench/empty_progs.c $(BUILD)/bench/empty.skel.h
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CFLAGS) -I$(BUILD)/bench -o $@ $< -lbpf -lelf -lz

$(BUILD)/bench/mark_bench: tests/bench/mark_bench.c include/hybtrace/mark.h | $(BUILD)/bench
	$(call msg,LINK,$@)
	$(Q)$(CC) -O2 -g -Iinclude -o $@ $<

# Intel PT decode speed without PT hardware: the tests' PT synthesizer, the workload built at run time.
$(BUILD)/bench/bench_decode: tests/pt/bench_decode.c $(TEST_LIB_HDRS) $(BUILD)/tests/libhttest.a \
		$(BUILD)/libhybtrace.a | $(BUILD)/bench
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS_ALL) -Itests/pt $(CFLAGS) $(WARNINGS) -o $@ $< $(BUILD)/tests/libhttest.a \
		$(BUILD)/libhybtrace.a $(LDLIBS)

# Symbol tables of many processes mapping the same files, shared or each its own.
$(BUILD)/bench/bench_symbols: tests/bench/bench_symbols.c $(BUILD)/libhybtrace.a | $(BUILD)/bench
	$(call msg,LINK,$@)
	$(Q)$(CC) $(CPPFLAGS_ALL) $(CFLAGS) $(WARNINGS) -o $@ $< $(BUILD)/libhybtrace.a $(LDLIBS)

bench: bench-deps
	$(MAKE) all $(WORKLOAD_BINS) $(BENCH_BINS)
	python3 tests/bench/bench.py

# One short iteration of every measurement, so the benchmark never rots.
bench-smoke: all $(WORKLOAD_BINS) $(BENCH_BINS)
	python3 tests/bench/bench.py --smoke

# hybtrace under ASan+LSan against steady breaches for SOAK_SECONDS (default 10 min):
# RSS and descriptors flat after the warm-up, no leaks at exit. Needs root.
SOAK_SECONDS ?= 600
soak: $(ASAN)/hybtrace $(BUILD)/workloads/steady
	python3 tests/soak.py --seconds $(SOAK_SECONDS)

install: $(BUILD)/hybtrace
	install -D -m 0755 $(BUILD)/hybtrace $(DESTDIR)$(PREFIX)/bin/hybtrace

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/hybtrace

format:
	clang-format -i bpf/*.c bpf/*.h userspace/main.c $(LIB_SRCS) $(USERSPACE_HDRS) include/hybtrace/*.h tests/unit/*.c tests/workloads/*.c

clean:
	rm -rf $(BUILD)

# Fuzz targets: libFuzzer with ASan and UBSan (clang; Debian's libclang-rt-14-dev).
# Each links only the files it reads with; new inputs go to $(BUILD)/fuzz/corpus,
# the checked-in corpus stays as it is.
FUZZ_CFLAGS := -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all
FUZZ_TRACE_READER_SRCS := userspace/trace/timeline.c userspace/trace/pb.c userspace/trace/perfetto_write.c \
	userspace/trace/perfetto_read.c
# And the native scheduling data of the same bytes, read into thread states (report).
FUZZ_TRACE_READER_SRCS += userspace/kernel/sched_read.c userspace/base/log.c
# The symbolizer's parsers: /proc/PID/maps, perf maps, ELF files (the vdso's in-memory path).
FUZZ_MAPS_PARSER_SRCS := userspace/symbols/proc_maps.c userspace/base/proc.c userspace/base/log.c
FUZZ_PERF_MAP_SRCS := userspace/symbols/perf_map.c userspace/base/log.c
FUZZ_ELF_READER_SRCS := userspace/symbols/elf_symbols.c userspace/base/log.c
# The raw capture file (--keep-raw) and what it holds: sideband records, TSC pairs.
FUZZ_RAWCAP_READER_SRCS := $(wildcard userspace/sources/intelpt/rawcap_*.c) userspace/kernel/pid_names.c userspace/base/output.c userspace/base/log.c
# User marks read out of a target's memory (include/hybtrace/mark.h's registry and rings).
FUZZ_MARKS_SRCS := userspace/sources/marks/marks.c userspace/symbols/proc_maps.c userspace/symbols/target_files.c userspace/base/proc.c userspace/base/log.c
# Command lines: options and the trigger specs they carry.
FUZZ_OPTIONS_SRCS := userspace/cli/options.c userspace/base/syscalls.c userspace/triggers/trigger_spec.c \
	userspace/symbols/symbolizer.c userspace/symbols/elf_cache.c userspace/symbols/proc_maps.c userspace/symbols/elf_symbols.c userspace/symbols/perf_map.c \
	userspace/symbols/target_files.c userspace/symbols/module_names.c \
	userspace/base/proc.c userspace/base/log.c
# The breach kinds' rows name the threshold options.
FUZZ_OPTIONS_SRCS += userspace/base/breach_kinds.c
# The targets' resolution (not called by the fuzzer) links with the cgroup helpers.
FUZZ_OPTIONS_SRCS += userspace/base/cgroup.c
# The sources' registry names --source's values; the sources behind it come, unfuzzed, from
# the library, so that a new source needs nothing here.
FUZZ_OPTIONS_SRCS += userspace/cli/sources.c
# The OCaml exception-trap note of a traced binary (its note section, or the ELF file).
FUZZ_OCAML_EH_SRCS := userspace/sources/intelpt/ocaml_eh.c userspace/base/log.c
FUZZ_NAMES := trace_reader maps_parser perf_map elf_reader rawcap_reader marks options ocaml_eh
FUZZ_CORPORA := $(patsubst %,$(BUILD)/fuzz/corpus/%,$(FUZZ_NAMES))

$(BUILD)/fuzz $(FUZZ_CORPORA):
	mkdir -p $@

$(BUILD)/fuzz/fuzz_trace_reader: tests/fuzz/fuzz_trace_reader.c $(FUZZ_TRACE_READER_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_TRACE_READER_SRCS)

$(BUILD)/fuzz/fuzz_maps_parser: tests/fuzz/fuzz_maps_parser.c $(FUZZ_MAPS_PARSER_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_MAPS_PARSER_SRCS)

$(BUILD)/fuzz/fuzz_perf_map: tests/fuzz/fuzz_perf_map.c $(FUZZ_PERF_MAP_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_PERF_MAP_SRCS)

$(BUILD)/fuzz/fuzz_elf_reader: tests/fuzz/fuzz_elf_reader.c $(FUZZ_ELF_READER_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_ELF_READER_SRCS) -lelf

$(BUILD)/fuzz/fuzz_rawcap_reader: tests/fuzz/fuzz_rawcap_reader.c $(FUZZ_RAWCAP_READER_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_RAWCAP_READER_SRCS) -lz

$(BUILD)/fuzz/fuzz_marks: tests/fuzz/fuzz_marks.c $(FUZZ_MARKS_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_MARKS_SRCS) -lelf -lz

$(BUILD)/fuzz/fuzz_options: tests/fuzz/fuzz_options.c $(FUZZ_OPTIONS_SRCS) \
		$(USERSPACE_HDRS) $(BUILD)/libhybtrace.a | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_OPTIONS_SRCS) \
		$(BUILD)/libhybtrace.a $(LDLIBS)

$(BUILD)/fuzz/fuzz_ocaml_eh: tests/fuzz/fuzz_ocaml_eh.c $(FUZZ_OCAML_EH_SRCS) \
		$(USERSPACE_HDRS) | $(BUILD)/fuzz
	$(call msg,FUZZ,$@)
	$(Q)$(CLANG) $(CPPFLAGS_ALL) $(FUZZ_CFLAGS) $(WARNINGS) -o $@ $< $(FUZZ_OCAML_EH_SRCS) -lelf

FUZZ_TARGETS := $(patsubst %,$(BUILD)/fuzz/fuzz_%,$(FUZZ_NAMES))

.PHONY: fuzz fuzz-targets
fuzz-targets: $(FUZZ_TARGETS)

# `make fuzz`: each target for FUZZ_RUNS executions (default one million), or for
# FUZZ_SECONDS seconds when that is given. A crash stops it, leaving crash-* here:
# the input goes into tests/fuzz/corpus/NAME as a regression input.
FUZZ_RUNS ?= 1000000
FUZZ_LIMIT = $(if $(FUZZ_SECONDS),-max_total_time=$(FUZZ_SECONDS),-runs=$(FUZZ_RUNS))
fuzz: $(FUZZ_TARGETS) | $(FUZZ_CORPORA)
	$(Q)set -e; for name in $(FUZZ_NAMES); do \
		echo "fuzz_$$name: $(FUZZ_LIMIT)"; \
		$(BUILD)/fuzz/fuzz_$$name $(FUZZ_LIMIT) -max_len=8192 -malloc_limit_mb=256 \
			-print_final_stats=1 $(BUILD)/fuzz/corpus/$$name tests/fuzz/corpus/$$name \
			> $(BUILD)/fuzz/$$name.log 2>&1 || { tail -40 $(BUILD)/fuzz/$$name.log; exit 1; }; \
		grep -E '^stat::number_of_executed_units' $(BUILD)/fuzz/$$name.log; \
	done
