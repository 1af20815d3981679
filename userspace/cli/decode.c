// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `hybtrace decode RAW`: a raw capture (--keep-raw) made into the dump the
 * live path makes from it, here or on another machine, without privileges.
 * It goes through the same builder as a live dump; what only the live
 * session knows (its loss counters, names from the BPF comm map beyond
 * those saved, kernel symbols where kallsyms is hidden) is left out.
 */
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kernel/comm_cache.h"
#include "cli/decode.h"
#include "kernel/wait_chain.h"
#include "dump/dump_build.h"
#include "symbols/ksyms.h"
#include "base/log.h"
#include "base/output.h"
#include "sources/intelpt/intelpt_source.h"

static void usage(void)
{
	printf("usage: hybtrace decode RAW [--output DIR]\n"
	       "\n"
	       "Decode a raw capture saved with --keep-raw into the .perfetto-trace the live\n"
	       "dump makes: the kernel window and each thread's Intel PT call stacks.\n"
	       "\n"
	       "  -o, --output DIR     where the trace goes (default: the current directory);\n"
	       "                       it is named after RAW, never over an existing file\n"
	       "  -h, --help           this text\n");
}

/* RAW's file name without its directory and suffix. */
static void base_of(const char *path, char *buf, size_t len)
{
	const char *name = strrchr(path, '/');
	size_t n, suffix = strlen(HT_RAWCAP_SUFFIX);

	name = name ? name + 1 : path;
	n = strlen(name);
	if (n > suffix && !strcmp(name + n - suffix, HT_RAWCAP_SUFFIX))
		n -= suffix;
	snprintf(buf, len, "%.*s", (int)n, name);
}

/* The dump job the capture was made for. */
static void job_of(const struct ht_rawcap *cap, struct ht_dump_job *job)
{
	memset(job, 0, sizeof(*job));
	snprintf(job->kind, sizeof(job->kind), "%s", cap->kind);
	job->has_breach = cap->has_breach;
	if (cap->has_breach)
		job->breach = cap->breach;
	job->threshold_ns = cap->threshold_ns;
	job->start_ns = cap->start_ns;
	job->end_ns = cap->end_ns;
}

/*
 * Kernel names from the capture only: this machine may run another kernel,
 * and without CAP_SYSLOG its kallsyms shows no addresses anyway.
 */
static struct ht_ksyms *capture_ksyms(const struct ht_rawcap *cap)
{
	uint64_t *starts;
	const char **names;
	struct ht_ksyms *k = NULL;

	if (!cap->nksyms)
		return NULL;
	starts = calloc(cap->nksyms, sizeof(*starts));
	names = calloc(cap->nksyms, sizeof(*names));
	if (starts && names) {
		for (size_t i = 0; i < cap->nksyms; i++) {
			starts[i] = cap->ksyms[i].start;
			names[i] = cap->ksyms[i].name;
		}
		k = ht_ksyms_from_list(starts, names, cap->nksyms);
	}
	free(starts);
	free(names);
	return k;
}

static int decode_file(const char *path, const char *output_dir)
{
	struct ht_dumper_config cfg = { 0 };
	struct ht_dump_builder builder;
	struct ht_dump_capture c = { 0 };
	struct ht_rawcap *raw = ht_intelpt_frozen_offline(&c.frozen[0]);
	struct ht_dump_job job;
	struct ht_ksyms *ksyms;
	char err[512], base[256], cmdline[PATH_MAX + 32], out[PATH_MAX + 64];
	uint64_t bytes = 0;
	size_t events = 0;
	int rc = HT_EXIT_FAILURE;

	if (ht_rawcap_read(path, raw, err, sizeof(err))) {
		ht_error("%s", err);
		return HT_EXIT_USAGE;
	}
	c.nfrozen = 1;
	if (!raw->has_window) {
		ht_error("%s: the capture has no kernel window to decode around", path);
		goto out;
	}
	/* The window moves into the capture, as the live path reads it. */
	c.w = raw->window;
	memset(&raw->window, 0, sizeof(raw->window));
	raw->has_window = false;
	base_of(path, base, sizeof(base));
	snprintf(cmdline, sizeof(cmdline), "hybtrace decode %s", path);
	ksyms = capture_ksyms(raw);
	cfg = (struct ht_dumper_config){
		.output_dir = output_dir,
		.pre_ns = raw->pre_ns,
		.post_ns = raw->post_ns,
		.tgid = raw->pid,
		.target_comm = raw->comm,
		.cmdline = cmdline,
		.ksyms = ksyms,
		.base_name = base,
		.decoded_from = path,
		.chain_depth = HT_CHAIN_DEFAULT_DEPTH,
	};
	job_of(raw, &job);
	ht_dump_window(&cfg, &job, &c.t0, &c.t1);
	c.frozen_ns = raw->trigger_ns;
	if (ht_dump_builder_init(&builder, &cfg))
		goto free_ksyms;
	/* Names come from the capture, never from this machine's processes. */
	builder.comms->offline = true;
	for (size_t i = 0; i < raw->ncomms; i++)
		if (ht_comm_cache_seed(builder.comms, raw->comms[i].pid, raw->comms[i].comm))
			break;
	if (ht_dump_builder_write(&builder, &job, &c, 0, out, sizeof(out), &bytes, &events))
		ht_error("%s", ht_last_error());
	else {
		printf("%s\n", out);
		rc = 0;
	}
	ht_dump_builder_free(&builder);
free_ksyms:
	ht_ksyms_free(ksyms);
out:
	ht_dump_capture_free(&c);
	return rc;
}

int ht_decode_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "output", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *output_dir = ".";
	int opt;

	optind = 0;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (opt) {
		case 'o':
			output_dir = optarg;
			break;
		case 'h':
			usage();
			return 0;
		default:
			ht_error("decode: bad option '%s' (see hybtrace decode --help)",
				 argv[optind - 1]);
			return HT_EXIT_USAGE;
		}
	}
	if (optind != argc - 1) {
		ht_error("decode needs one RAW file (see hybtrace decode --help)");
		return HT_EXIT_USAGE;
	}
	if (ht_output_dir_check(output_dir)) {
		ht_error("%s", ht_last_error());
		return HT_EXIT_USAGE;
	}
	return decode_file(argv[optind], output_dir);
}
