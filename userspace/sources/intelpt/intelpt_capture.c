// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <cpuid.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>
#include "sources/intelpt/intelpt_capture.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/perf_event.h"
#include "base/proc.h"
#include "symbols/target_files.h"

/* Brackets tried per clock pair: the tightest is kept. */
#define CLOCK_PAIR_TRIES 16
#define MIN_AUX_PAGES	 2

_Static_assert(offsetof(struct perf_event_attr, aux_sample_size) + 4 == HT_ATTR_AUX_ACTION_OFFSET,
	       "aux_action is the u32 after aux_sample_size");
_Static_assert(sizeof(struct perf_event_attr) >= HT_ATTR_AUX_ACTION_OFFSET + 4,
	       "perf_event_attr reaches aux_action");

void ht_attr_set_aux_action(struct perf_event_attr *attr, uint32_t bits)
{
	memcpy((uint8_t *)attr + HT_ATTR_AUX_ACTION_OFFSET, &bits, sizeof(bits));
}

uint32_t ht_attr_aux_action(const struct perf_event_attr *attr)
{
	uint32_t bits;

	memcpy(&bits, (const uint8_t *)attr + HT_ATTR_AUX_ACTION_OFFSET, sizeof(bits));
	return bits;
}

static const char *const term_names[HT_PT_TERM_COUNT] = {
	[HT_PT_TERM_PT] = "pt",
	[HT_PT_TERM_BRANCH] = "branch",
	[HT_PT_TERM_TSC] = "tsc",
	[HT_PT_TERM_MTC] = "mtc",
	[HT_PT_TERM_MTC_PERIOD] = "mtc_period",
	[HT_PT_TERM_PSB_PERIOD] = "psb_period",
	[HT_PT_TERM_CYC] = "cyc",
	[HT_PT_TERM_CYC_THRESH] = "cyc_thresh",
	[HT_PT_TERM_NORETCOMP] = "noretcomp",
};

static int perf_open(struct perf_event_attr *attr, int pid, int cpu)
{
	return ht_perf_event_open(attr, pid, cpu);
}

static uint64_t clock_ns(clockid_t id)
{
	return ht_clock_ns(id);
}

/* ---- sysfs ---- */

static const char *root_of(const char *sysroot)
{
	return sysroot && strcmp(sysroot, "/") ? sysroot : "";
}

/* A small sysfs file's text without its trailing newline: 0, -1 (errno set). */
static int read_text(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, len - 1);
	close(fd);
	if (n < 0)
		return -1;
	buf[n] = 0;
	while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
		buf[--n] = 0;
	return 0;
}

static int parse_uint(const char *s, int base, uint64_t max, uint64_t *out)
{
	char *end;
	unsigned long long v;

	if (!*s || *s == '-' || *s == '+' || *s == ' ')
		return -1;
	errno = 0;
	v = strtoull(s, &end, base);
	if (errno || *end || v > max)
		return -1;
	*out = v;
	return 0;
}

int ht_pt_format_parse(const char *text, uint64_t *mask)
{
	const char *p;
	uint64_t m = 0;

	if (strncmp(text, "config:", 7))
		return ht_fail("\"%s\" is not in attr.config (expected config:N or config:N-M)",
			       text);
	p = text + 7;
	for (;;) {
		unsigned long lo, hi;
		char *end;

		if (*p < '0' || *p > '9')
			return ht_fail("malformed \"%s\" (expected config:N or config:N-M)", text);
		lo = strtoul(p, &end, 10);
		hi = lo;
		p = end;
		if (*p == '-') {
			p++;
			if (*p < '0' || *p > '9')
				return ht_fail("malformed \"%s\" (expected config:N or config:N-M)",
					       text);
			hi = strtoul(p, &end, 10);
			p = end;
		}
		if (lo > hi || hi > 63)
			return ht_fail("bad bit range in \"%s\" (bits are 0-63, low first)", text);
		for (unsigned long b = lo; b <= hi; b++)
			m |= 1ULL << b;
		if (!*p)
			break;
		if (*p != ',')
			return ht_fail("malformed \"%s\" (expected config:N or config:N-M)", text);
		p++;
	}
	*mask = m;
	return 0;
}

int ht_pt_term_put(uint64_t mask, uint64_t value, uint64_t *config)
{
	uint64_t placed = 0;
	int bit = 0;

	if (!mask)
		return value ? -1 : 0;
	for (int b = 0; b < 64; b++) {
		if (!(mask & (1ULL << b)))
			continue;
		if (value & (1ULL << bit))
			placed |= 1ULL << b;
		bit++;
	}
	if (bit < 64 && (value >> bit))
		return -1;
	*config = (*config & ~mask) | placed;
	return 0;
}

uint64_t ht_pt_term_get(uint64_t mask, uint64_t config)
{
	uint64_t v = 0;
	int bit = 0;

	for (int b = 0; b < 64; b++) {
		if (!(mask & (1ULL << b)))
			continue;
		if (config & (1ULL << b))
			v |= 1ULL << bit;
		bit++;
	}
	return v;
}

/* The caps files read, and where their values go. */
enum cap_kind { CAP_BOOL, CAP_HEX, CAP_DEC };

struct cap_file {
	const char *name;
	enum cap_kind kind;
	size_t offset; /* into struct ht_intelpt_pmu: a bool or a uint32_t */
};

#define CAP_AT(field) offsetof(struct ht_intelpt_pmu, field)

static const struct cap_file cap_files[] = {
	{"mtc", CAP_BOOL, CAP_AT(cap_mtc)},
	{"psb_cyc", CAP_BOOL, CAP_AT(cap_psb_cyc)},
	{"ip_filtering", CAP_BOOL, CAP_AT(cap_ip_filtering)},
	{"cr3_filtering", CAP_BOOL, CAP_AT(cap_cr3_filtering)},
	{"ptwrite", CAP_BOOL, CAP_AT(cap_ptwrite)},
	{"power_event_trace", CAP_BOOL, CAP_AT(cap_power_event_trace)},
	{"topa_multiple_entries", CAP_BOOL, CAP_AT(cap_topa_multiple_entries)},
	{"single_range_output", CAP_BOOL, CAP_AT(cap_single_range_output)},
	{"mtc_periods", CAP_HEX, CAP_AT(mtc_periods)},
	{"psb_periods", CAP_HEX, CAP_AT(psb_periods)},
	{"cycle_thresholds", CAP_HEX, CAP_AT(cycle_thresholds)},
	{"num_address_ranges", CAP_DEC, CAP_AT(num_address_ranges)},
};

static int read_caps(const char *dir, struct ht_intelpt_pmu *pmu)
{
	char path[PATH_MAX + 64], text[64];

	for (size_t i = 0; i < sizeof(cap_files) / sizeof(cap_files[0]); i++) {
		const struct cap_file *c = &cap_files[i];
		uint64_t v;
		int rc;

		snprintf(path, sizeof(path), "%s/caps/%s", dir, c->name);
		if (read_text(path, text, sizeof(text))) {
			if (errno == ENOENT)
				continue; /* not capable: said when a config needs it */
			return ht_fail("cannot read %s: %s", path, strerror(errno));
		}
		pmu->has_caps_dir = true;
		if (c->kind == CAP_HEX)
			rc = parse_uint(text, 16, UINT32_MAX, &v);
		else
			rc = parse_uint(text, 10, c->kind == CAP_BOOL ? 1 : UINT32_MAX, &v);
		if (rc)
			return ht_fail("malformed %s: \"%s\"", path, text);
		if (c->kind == CAP_BOOL)
			*(bool *)((uint8_t *)pmu + c->offset) = v != 0;
		else
			*(uint32_t *)((uint8_t *)pmu + c->offset) = (uint32_t)v;
	}
	return 0;
}

/* The values libipt wants from sysfs; absent ones stay unset. */
static int read_decoder_values(const char *dir, struct ht_intelpt_pmu *pmu)
{
	char path[PATH_MAX + 64], text[64];
	uint64_t v;

	snprintf(path, sizeof(path), "%s/max_nonturbo_ratio", dir);
	if (!read_text(path, text, sizeof(text))) {
		if (parse_uint(text, 10, UINT8_MAX, &v))
			return ht_fail("malformed %s: \"%s\"", path, text);
		pmu->has_max_nonturbo_ratio = true;
		pmu->max_nonturbo_ratio = (uint32_t)v;
	}
	snprintf(path, sizeof(path), "%s/tsc_art_ratio", dir);
	if (!read_text(path, text, sizeof(text))) {
		char *colon = strchr(text, ':');
		uint64_t n, d;

		if (!colon)
			return ht_fail("malformed %s: \"%s\" (expected N:D)", path, text);
		*colon = 0;
		if (parse_uint(text, 10, UINT32_MAX, &n) ||
		    parse_uint(colon + 1, 10, UINT32_MAX, &d))
			return ht_fail("malformed %s (expected N:D)", path);
		pmu->has_tsc_art_ratio = true;
		pmu->tsc_art_num = (uint32_t)n;
		pmu->tsc_art_den = (uint32_t)d;
	}
	return 0;
}

int ht_intelpt_pmu_read(const char *sysroot, struct ht_intelpt_pmu *pmu)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], text[128];
	struct stat st;
	uint64_t v;

	memset(pmu, 0, sizeof(*pmu));
	if ((size_t)snprintf(dir, sizeof(dir), "%s" HT_INTELPT_SYSFS_DIR, root_of(sysroot)) >=
	    sizeof(dir))
		return ht_fail("sysfs root too long: %s", sysroot);
	if (stat(dir, &st))
		return ht_fail("no Intel PT on this machine (%s: %s; AMD CPUs and most virtual "
			       "machines have none)",
			       dir, strerror(errno));
	snprintf(path, sizeof(path), "%s/type", dir);
	if (read_text(path, text, sizeof(text)))
		return ht_fail("cannot read %s: %s", path, strerror(errno));
	if (parse_uint(text, 10, UINT32_MAX, &v))
		return ht_fail("malformed %s: \"%s\"", path, text);
	pmu->type = (uint32_t)v;
	for (int t = 0; t < HT_PT_TERM_COUNT; t++) {
		snprintf(path, sizeof(path), "%s/format/%s", dir, term_names[t]);
		if (read_text(path, text, sizeof(text))) {
			if (errno == ENOENT)
				continue; /* this kernel lacks the term: said when it is needed */
			return ht_fail("cannot read %s: %s", path, strerror(errno));
		}
		if (ht_pt_format_parse(text, &pmu->term_mask[t]))
			return ht_fail("intel_pt format/%s: %s", term_names[t], ht_last_error());
	}
	if (read_caps(dir, pmu) || read_decoder_values(dir, pmu))
		return -1;
	return 0;
}

/* ---- config ---- */

void ht_intelpt_request_default(struct ht_intelpt_request *req)
{
	memset(req, 0, sizeof(*req));
	req->mtc_period = -1;
	req->psb_period = -1;
	req->cyc_thresh = -1;
}

/* The allowed bit nearest TARGET, as perf picks: the highest at or below it, else the lowest. */
static int pick_bit(uint32_t bits, int target)
{
	int pick = -1;

	for (int pos = 0; pos < 32; pos++) {
		if (!(bits & (1u << pos)))
			continue;
		if (pos <= target || pick < 0)
			pick = pos;
		if (pos >= target)
			break;
	}
	return pick;
}

/* "0,3,6,9" or "0-13" */
static const char *bits_list(uint32_t bits, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = 0;
	for (int b = 0; b < 32 && at < len; b++) {
		int e = b;

		if (!(bits & (1u << b)))
			continue;
		while (e + 1 < 32 && (bits & (1u << (e + 1))))
			e++;
		if (e - b >= 2)
			at += (size_t)snprintf(buf + at, len - at, "%s%d-%d", at ? "," : "", b, e);
		else
			for (int i = b; i <= e && at < len; i++)
				at += (size_t)snprintf(buf + at, len - at, "%s%d", at ? "," : "",
						       i);
		b = e;
	}
	return buf;
}

static int need_term(const struct ht_intelpt_pmu *pmu, enum ht_pt_term t)
{
	if (pmu->term_mask[t])
		return 0;
	return ht_fail("this kernel's intel_pt has no '%s' config term (format/%s is missing)",
		       term_names[t], term_names[t]);
}

/* Put VALUE of term T, allowed by the caps bitmap ALLOWED (0 is always allowed). */
static int put_checked(const struct ht_intelpt_pmu *pmu, enum ht_pt_term t, int value,
		       uint32_t allowed, const char *caps_name, uint64_t *config)
{
	int width = __builtin_popcountll(pmu->term_mask[t]);
	char list[96];

	if (need_term(pmu, t))
		return -1;
	if (value < 0 || (width < 31 && value >= (1 << width)) || value > 31)
		return ht_fail("%s=%d is out of range: format/%s holds 0-%d", term_names[t], value,
			       term_names[t], width < 6 ? (1 << width) - 1 : 31);
	if (value && !(allowed & (1u << value)))
		return ht_fail("%s=%d is not supported by this CPU's Intel PT (caps/%s allows "
			       "%s)",
			       term_names[t], value, caps_name,
			       bits_list(allowed | 1, list, sizeof(list)));
	return ht_pt_term_put(pmu->term_mask[t], (uint64_t)value, config);
}

static int put_flag(const struct ht_intelpt_pmu *pmu, enum ht_pt_term t, uint64_t *config)
{
	if (need_term(pmu, t))
		return -1;
	return ht_pt_term_put(pmu->term_mask[t], 1, config);
}

int ht_intelpt_build_config(const struct ht_intelpt_pmu *pmu, const struct ht_intelpt_request *req,
			    struct ht_pt_fields *fields, uint64_t *config)
{
	uint64_t c = 0;
	int period;

	memset(fields, 0, sizeof(*fields));
	*config = 0;
	if (put_flag(pmu, HT_PT_TERM_PT, &c) || put_flag(pmu, HT_PT_TERM_BRANCH, &c) ||
	    put_flag(pmu, HT_PT_TERM_TSC, &c))
		return -1;
	/* MTC: timing between TSC packets. Asked for: it must be there; by default: if it is. */
	if (req->mtc_period >= 0 && !pmu->cap_mtc)
		return ht_fail("mtc_period=%d asked for, but this CPU's Intel PT has no MTC "
			       "packets (caps/mtc is 0 or missing)",
			       req->mtc_period);
	period = req->mtc_period >= 0 ? req->mtc_period : pick_bit(pmu->mtc_periods, 3);
	if (pmu->cap_mtc && period >= 0) {
		if (put_flag(pmu, HT_PT_TERM_MTC, &c) ||
		    put_checked(pmu, HT_PT_TERM_MTC_PERIOD, period, pmu->mtc_periods, "mtc_periods",
				&c))
			return -1;
	}
	/* PSB period: how often the decoder can sync; perf sets it only with MTC too. */
	if (req->psb_period >= 0 && !pmu->cap_psb_cyc)
		return ht_fail("psb_period=%d asked for, but this CPU's Intel PT cannot change "
			       "it (caps/psb_cyc is 0 or missing)",
			       req->psb_period);
	period = req->psb_period >= 0 ? req->psb_period : pick_bit(pmu->psb_periods, 3);
	if (pmu->cap_psb_cyc && period >= 0 && (req->psb_period >= 0 || pmu->mtc_periods)) {
		if (put_checked(pmu, HT_PT_TERM_PSB_PERIOD, period, pmu->psb_periods, "psb_periods",
				&c))
			return -1;
	}
	if (req->fine_timing) {
		if (!pmu->cap_psb_cyc)
			return ht_fail("fine PT timing needs CYC packets, which this CPU's Intel "
				       "PT lacks (caps/psb_cyc is 0 or missing): use --pt-timing "
				       "coarse");
		if (put_flag(pmu, HT_PT_TERM_CYC, &c) ||
		    put_checked(pmu, HT_PT_TERM_CYC_THRESH,
				req->cyc_thresh >= 0 ? req->cyc_thresh : 0, pmu->cycle_thresholds,
				"cycle_thresholds", &c))
			return -1;
	} else if (req->cyc_thresh >= 0) {
		return ht_fail("cyc_thresh=%d needs fine timing (--pt-timing fine)",
			       req->cyc_thresh);
	}
	if (req->noretcomp && put_flag(pmu, HT_PT_TERM_NORETCOMP, &c))
		return -1;
	*config = c;
	ht_intelpt_decode_config(pmu, c, fields);
	return 0;
}

void ht_intelpt_decode_config(const struct ht_intelpt_pmu *pmu, uint64_t config,
			      struct ht_pt_fields *f)
{
	memset(f, 0, sizeof(*f));
	f->pt = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_PT], config);
	f->branch = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_BRANCH], config);
	f->tsc = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_TSC], config);
	f->mtc = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_MTC], config);
	f->mtc_period = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_MTC_PERIOD], config);
	f->psb_period = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_PSB_PERIOD], config);
	f->cyc = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_CYC], config);
	f->cyc_thresh = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_CYC_THRESH], config);
	f->noretcomp = (uint8_t)ht_pt_term_get(pmu->term_mask[HT_PT_TERM_NORETCOMP], config);
}

const char *ht_pt_fields_format(const struct ht_pt_fields *f, char *buf, size_t len)
{
	size_t at = 0;

#define ADD(...)                                                                                   \
	do {                                                                                       \
		if (at < len)                                                                      \
			at += (size_t)snprintf(buf + at, len - at, __VA_ARGS__);                   \
	} while (0)
	buf[0] = 0;
	if (f->tsc)
		ADD("tsc");
	if (f->mtc)
		ADD("%smtc,mtc_period=%u", at ? "," : "", f->mtc_period);
	if (f->psb_period)
		ADD("%spsb_period=%u", at ? "," : "", f->psb_period);
	if (f->cyc)
		ADD("%scyc,cyc_thresh=%u", at ? "," : "", f->cyc_thresh);
	if (f->noretcomp)
		ADD("%snoretcomp", at ? "," : "");
	if (f->pt)
		ADD("%spt", at ? "," : "");
	if (f->branch)
		ADD("%sbranch", at ? "," : "");
#undef ADD
	return buf;
}

void ht_intelpt_pt_attr(const struct ht_intelpt_pmu *pmu, uint64_t config,
			struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = pmu->type;
	a->size = sizeof(*a);
	a->config = config;
	a->inherit = 1;
	/* User space only: the kernel side comes from the flight recorder. */
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->sample_id_all = 1;
	a->sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE;
}

void ht_intelpt_sideband_attr(struct perf_event_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->type = PERF_TYPE_SOFTWARE;
	a->size = sizeof(*a);
	a->config = PERF_COUNT_SW_DUMMY;
	a->inherit = 1;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->mmap = 1;
	a->mmap2 = 1;
	a->comm = 1;
	a->comm_exec = 1;
	a->task = 1;
	a->context_switch = 1;
	a->sample_id_all = 1;
	a->sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	/* Overwrite, newest kept: the sideband of the last moments is what a dump needs. */
	a->write_backward = 1;
}

/* ---- hybtrace check ---- */

static void caps_summary(const struct ht_intelpt_pmu *p, char *buf, size_t len)
{
	char a[64], b[64], c[64];

	snprintf(buf, len,
		 "type %u; mtc %s (periods %s), psb_cyc %s (psb periods %s, cycle thresholds "
		 "%s), ip_filtering %s (%u ranges), ptwrite %s, power events %s",
		 p->type, p->cap_mtc ? "yes" : "no", bits_list(p->mtc_periods, a, sizeof(a)),
		 p->cap_psb_cyc ? "yes" : "no", bits_list(p->psb_periods, b, sizeof(b)),
		 bits_list(p->cycle_thresholds, c, sizeof(c)), p->cap_ip_filtering ? "yes" : "no",
		 p->num_address_ranges, p->cap_ptwrite ? "yes" : "no",
		 p->cap_power_event_trace ? "yes" : "no");
}

/*
 * Whether the kernel knows aux_action: it refuses an unknown bit in the
 * reserved word with EINVAL, and aux_start_paused on a PMU without
 * PERF_PMU_CAP_AUX_PAUSE (the software one) with EOPNOTSUPP.
 */
static int probe_kernel_aux_action(char *why, size_t len)
{
	struct perf_event_attr a;
	int fd, err;

	ht_intelpt_sideband_attr(&a);
	a.inherit = 0;
	a.disabled = 1;
	a.use_clockid = 0;
	ht_attr_set_aux_action(&a, HT_AUX_START_PAUSED);
	fd = perf_open(&a, 0, -1);
	err = errno;
	if (fd >= 0) {
		close(fd);
		return 1;
	}
	if (err == EOPNOTSUPP)
		return 1;
	if (err == EINVAL) {
		struct utsname u;

		uname(&u);
		snprintf(why, len, "the kernel (%s) predates aux_pause/aux_resume (Linux 6.13)",
			 u.release);
		return 0;
	}
	snprintf(why, len, "cannot tell whether the kernel has aux_pause: %s", strerror(err));
	return -1;
}

int ht_intelpt_probe(const char *sysroot, struct ht_intelpt_info *info)
{
	struct ht_intelpt_request req;
	struct ht_pt_fields f;
	int kernel;

	memset(info, 0, sizeof(*info));
	kernel = probe_kernel_aux_action(info->aux_pause_why, sizeof(info->aux_pause_why));
	info->kernel_aux_action = kernel > 0;
	if (ht_intelpt_pmu_read(sysroot, &info->pmu)) {
		snprintf(info->why, sizeof(info->why), "%s", ht_last_error());
		info->aux_pause = kernel > 0	? HT_AUX_PAUSE_NO_PMU
				  : kernel == 0 ? HT_AUX_PAUSE_NO_KERNEL
						: HT_AUX_PAUSE_UNKNOWN;
		if (kernel > 0)
			snprintf(info->aux_pause_why, sizeof(info->aux_pause_why),
				 "the kernel has aux_pause, but there is no Intel PT");
		return 0;
	}
	info->present = true;
	caps_summary(&info->pmu, info->why, sizeof(info->why));
	ht_intelpt_request_default(&req);
	if (ht_intelpt_build_config(&info->pmu, &req, &f, &info->default_config_bits))
		snprintf(info->default_config, sizeof(info->default_config), "(none: %s)",
			 ht_last_error());
	else
		ht_pt_fields_format(&f, info->default_config, sizeof(info->default_config));
	if (kernel <= 0) {
		info->aux_pause = kernel == 0 ? HT_AUX_PAUSE_NO_KERNEL : HT_AUX_PAUSE_UNKNOWN;
		return 0;
	}
	/* The kernel has it; does this PMU? Open one paused event on ourselves and see. */
	{
		struct perf_event_attr a;
		int fd, err;

		ht_intelpt_pt_attr(&info->pmu, info->default_config_bits, &a);
		a.inherit = 0;
		a.disabled = 1;
		ht_attr_set_aux_action(&a, HT_AUX_START_PAUSED);
		fd = perf_open(&a, 0, -1);
		err = errno;
		if (fd >= 0) {
			close(fd);
			info->aux_pause = HT_AUX_PAUSE_YES;
			snprintf(info->aux_pause_why, sizeof(info->aux_pause_why),
				 "aux_start_paused, aux_pause and aux_resume are supported");
		} else if (err == EOPNOTSUPP) {
			info->aux_pause = HT_AUX_PAUSE_NO_PMU;
			snprintf(info->aux_pause_why, sizeof(info->aux_pause_why),
				 "the kernel has aux_pause, this intel_pt PMU does not");
		} else {
			info->aux_pause = HT_AUX_PAUSE_UNKNOWN;
			snprintf(info->aux_pause_why, sizeof(info->aux_pause_why),
				 "cannot open an Intel PT event to check aux_pause: %s",
				 strerror(err));
		}
	}
	return 0;
}

/* ---- cpuid, clocks ---- */

void ht_cpuid_read(struct ht_cpuid_values *c)
{
	unsigned int a, b, cx, d;

	memset(c, 0, sizeof(*c));
	if (!__get_cpuid(0, &a, &b, &cx, &d))
		return;
	c->max_leaf = a;
	memcpy(c->vendor, &b, 4);
	memcpy(c->vendor + 4, &d, 4);
	memcpy(c->vendor + 8, &cx, 4);
	c->vendor[12] = 0;
	__cpuid_count(1, 0, c->leaf1[0], c->leaf1[1], c->leaf1[2], c->leaf1[3]);
	if (c->max_leaf >= 0x14) {
		__cpuid_count(0x14, 0, c->leaf14_0[0], c->leaf14_0[1], c->leaf14_0[2],
			      c->leaf14_0[3]);
		__cpuid_count(0x14, 1, c->leaf14_1[0], c->leaf14_1[1], c->leaf14_1[2],
			      c->leaf14_1[3]);
	}
	if (c->max_leaf >= 0x15)
		__cpuid_count(0x15, 0, c->leaf15[0], c->leaf15[1], c->leaf15[2], c->leaf15[3]);
}

static uint64_t rdtsc_ordered(void)
{
	uint64_t t;

	_mm_lfence();
	t = __rdtsc();
	_mm_lfence();
	return t;
}

void ht_clock_pair_take(struct ht_clock_pair *pair, unsigned int tries, uint32_t when)
{
	uint64_t best = UINT64_MAX;

	memset(pair, 0, sizeof(*pair));
	pair->when = when;
	for (unsigned int i = 0; i < (tries ? tries : 1); i++) {
		uint64_t m1 = clock_ns(CLOCK_MONOTONIC);
		uint64_t tsc = rdtsc_ordered();
		uint64_t m2 = clock_ns(CLOCK_MONOTONIC);

		if (m2 - m1 >= best)
			continue;
		best = m2 - m1;
		pair->tsc = tsc;
		pair->mono_ns = m1 + best / 2;
		pair->spread_ns = best > UINT32_MAX ? UINT32_MAX : (uint32_t)best;
	}
}

/* The mmap page's conversion, read under its sequence lock. */
static void read_time_conv(const struct perf_event_mmap_page *pg, struct ht_perf_time_conv *t)
{
	uint32_t seq;
	int tries = 0;

	do {
		seq = __atomic_load_n(&pg->lock, __ATOMIC_ACQUIRE);
		t->cap_user_time = pg->cap_user_time;
		t->cap_user_time_zero = pg->cap_user_time_zero;
		t->time_shift = pg->time_shift;
		t->time_mult = pg->time_mult;
		t->time_zero = pg->time_zero;
		__atomic_thread_fence(__ATOMIC_ACQUIRE);
	} while (__atomic_load_n(&pg->lock, __ATOMIC_RELAXED) != seq && ++tries < 100);
	if (!t->cap_user_time)
		memset(t, 0, sizeof(*t));
}

/* ---- the AUX area ---- */

static size_t first_nonzero(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n && ((uintptr_t)(p + i) & 7))
		if (p[i++])
			return i - 1;
	for (; i + 8 <= n; i += 8) {
		uint64_t w;

		memcpy(&w, p + i, 8);
		if (w)
			break;
	}
	for (; i < n; i++)
		if (p[i])
			return i;
	return n;
}

size_t ht_intelpt_ring_copy(const uint8_t *area, size_t size, uint64_t head, uint8_t *out)
{
	size_t h, skip, start, n, first;

	if (!size || (size & (size - 1)))
		return 0;
	h = (size_t)(head & (size - 1));
	/* The oldest end: zeros the hardware never wrote, up to the first byte it did. */
	skip = first_nonzero(area + h, size - h);
	if (skip == size - h)
		skip += first_nonzero(area, h);
	if (skip == size)
		return 0;
	start = (h + skip) & (size - 1);
	n = size - skip;
	first = size - start < n ? size - start : n;
	memcpy(out, area + start, first);
	memcpy(out + first, area, n - first);
	return n;
}

/* ---- capture ---- */

uint64_t ht_intelpt_memory_needed(uint64_t aux_bytes, uint64_t sideband_bytes, unsigned int ncpus,
				  bool sideband_only)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	uint64_t per_cpu = sideband_bytes + page;

	if (!sideband_only)
		per_cpu += aux_bytes + (1 + HT_INTELPT_DATA_PAGES) * page;
	return per_cpu * ncpus;
}

size_t ht_intelpt_fds_needed(size_t nthreads, unsigned int ncpus)
{
	return nthreads * ncpus * 2;
}

static bool is_pow2(uint64_t v)
{
	return v && !(v & (v - 1));
}

/* The online CPUs, from "0-3,5" in /sys/devices/system/cpu/online (all when unreadable). */
static void read_online(bool *online, unsigned int ncpus)
{
	char text[4096], *p = text;

	if (read_text("/sys/devices/system/cpu/online", text, sizeof(text))) {
		for (unsigned int c = 0; c < ncpus; c++)
			online[c] = true;
		return;
	}
	while (*p) {
		char *end;
		unsigned long lo = strtoul(p, &end, 10), hi = lo;

		if (end == p)
			break;
		p = end;
		if (*p == '-')
			hi = strtoul(p + 1, &p, 10);
		for (unsigned long c = lo; c <= hi && c < ncpus; c++)
			online[c] = true;
		if (*p == ',')
			p++;
	}
}

static uint64_t boot_ticks_now(void)
{
	long hz = sysconf(_SC_CLK_TCK);

	return clock_ns(CLOCK_BOOTTIME) / (1000000000ULL / (uint64_t)(hz > 0 ? hz : 100));
}

/* When TID started, in clock ticks since boot (/proc/TGID/task/TID/stat field 22); 0: unknown. */
static uint64_t thread_start_ticks(int tgid, int tid)
{
	char path[64], text[1024], *p;
	unsigned long long start = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", tgid, tid);
	if (read_text(path, text, sizeof(text)))
		return 0;
	/* The comm may hold spaces and parentheses: fields count from the last ')'. */
	p = strrchr(text, ')');
	if (!p || sscanf(p + 1,
			 " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d "
			 "%*d %*d %*d %*d %llu",
			 &start) != 1)
		return 0;
	return start;
}

static bool thread_alive(int tgid, int tid)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%d", tgid, tid);
	return access(path, F_OK) == 0;
}

static struct ht_intelpt_thread *find_thread(struct ht_intelpt *pt, int tid)
{
	for (size_t i = 0; i < pt->nthreads; i++)
		if (pt->threads[i].tid == tid)
			return &pt->threads[i];
	return NULL;
}

static struct ht_intelpt_thread *add_thread(struct ht_intelpt *pt, int tid)
{
	struct ht_intelpt_thread *t;

	if (pt->nthreads == pt->threads_cap) {
		size_t cap = pt->threads_cap ? pt->threads_cap * 2 : 16;
		struct ht_intelpt_thread *v = realloc(pt->threads, cap * sizeof(*v));

		if (!v)
			return NULL;
		pt->threads = v;
		pt->threads_cap = cap;
	}
	t = &pt->threads[pt->nthreads];
	t->tid = tid;
	t->pt_fds = malloc(pt->ncpus * sizeof(*t->pt_fds));
	t->sb_fds = malloc(pt->ncpus * sizeof(*t->sb_fds));
	if (!t->pt_fds || !t->sb_fds) {
		free(t->pt_fds);
		free(t->sb_fds);
		return NULL;
	}
	for (unsigned int c = 0; c < pt->ncpus; c++)
		t->pt_fds[c] = t->sb_fds[c] = -1;
	pt->nthreads++;
	return t;
}

static const char *locked_hint(int err)
{
	return err == EPERM || err == ENOMEM ? " (locked memory: run as root, or lower --pt-size)"
					     : "";
}

static int map_area(struct ht_intelpt *pt, unsigned int cpu, int fd, int tid)
{
	struct ht_intelpt_area *a = &pt->areas[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_event_mmap_page *pg;

	a->base_len = (1 + HT_INTELPT_DATA_PAGES) * page;
	a->base = mmap(NULL, a->base_len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (a->base == MAP_FAILED) {
		int err = errno;

		a->base = NULL;
		return ht_fail("cannot map the Intel PT event of CPU %u: %s%s", cpu, strerror(err),
			       locked_hint(err));
	}
	/* Where the AUX area goes, said before it is mapped. */
	pg = a->base;
	pg->aux_offset = a->base_len;
	pg->aux_size = pt->cfg.aux_bytes;
	/* Read-only: overwrite (snapshot) mode, aux_head wraps inside the area. */
	a->aux = mmap(NULL, pt->cfg.aux_bytes, PROT_READ, MAP_SHARED, fd, (off_t)a->base_len);
	if (a->aux == MAP_FAILED) {
		int err = errno;

		a->aux = NULL;
		munmap(a->base, a->base_len);
		a->base = NULL;
		return ht_fail("cannot map a %" PRIu64 "-byte Intel PT area on CPU %u: %s%s",
			       pt->cfg.aux_bytes, cpu, strerror(err), locked_hint(err));
	}
	a->aux_len = pt->cfg.aux_bytes;
	a->fd = fd;
	a->tid = tid;
	return 0;
}

static int map_ring(struct ht_intelpt *pt, unsigned int cpu, int fd)
{
	struct ht_intelpt_sbring *r = &pt->rings[cpu];
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	r->data_size = pt->cfg.sideband_bytes;
	r->mmap_len = r->data_size + page;
	/* Read-only, as write_backward wants. */
	r->base = ht_perf_ring_map(fd, r->data_size, false);
	if (!r->base) {
		int err = errno;

		return ht_fail("cannot map a %zu-byte sideband ring on CPU %u: %s%s", r->data_size,
			       cpu, strerror(err), locked_hint(err));
	}
	r->fd = fd;
	return 0;
}

static int open_error(const char *what, int tid, unsigned int cpu, int err)
{
	if (err == EACCES || err == EPERM)
		return ht_fail("cannot open %s for tid %d on CPU %u: %s (needs root, or "
			       "CAP_PERFMON)",
			       what, tid, cpu, strerror(err));
	if (err == EMFILE || err == ENFILE)
		return ht_fail("cannot open %s for tid %d on CPU %u: %s (too many threads x CPUs "
			       "for the descriptor limit)",
			       what, tid, cpu, strerror(err));
	return ht_fail("cannot open %s for tid %d on CPU %u: %s", what, tid, cpu, strerror(err));
}

/*
 * The sideband event of TID on CPU: 0 with *FD (-1 when TID is gone), or
 * -1. Opened before the PT event, so a thread that inherited the PT event
 * (cloned after it) inherited this one too.
 */
static int open_sideband(int tid, unsigned int cpu, int *fd)
{
	struct perf_event_attr attr;

	ht_intelpt_sideband_attr(&attr);
	*fd = perf_open(&attr, tid, (int)cpu);
	if (*fd >= 0)
		return 0;
	if (errno == ESRCH)
		return 0;
	return open_error("a sideband event", tid, cpu, errno);
}

static int attach_sideband(struct ht_intelpt *pt, struct ht_intelpt_thread *t, unsigned int cpu,
			   int fd)
{
	if (pt->rings[cpu].fd < 0) {
		if (map_ring(pt, cpu, fd)) {
			close(fd);
			return -1;
		}
		return 0;
	}
	t->sb_fds[cpu] = fd;
	if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, pt->rings[cpu].fd))
		return ht_fail("cannot share CPU %u's sideband ring: %s", cpu, strerror(errno));
	return 0;
}

/* 1: TID is gone; 0: done (or inherited); -1: error. */
static int open_pt_event(struct ht_intelpt *pt, struct ht_intelpt_thread *t, unsigned int cpu,
			 int sb_fd)
{
	struct perf_event_attr attr;
	int fd, err;

	ht_intelpt_pt_attr(&pt->pmu, pt->config, &attr);
	/* Enabled once it has its area, as perf does: it cannot start without one. */
	attr.disabled = 1;
	fd = perf_open(&attr, t->tid, (int)cpu);
	if (fd < 0) {
		err = errno;
		if (err == ESRCH || (err == EBUSY && !thread_alive(pt->cfg.tgid, t->tid)))
			return 1;
		/*
		 * intel_pt is exclusive: one event per task and CPU. A thread born
		 * after we opened its parent's events has inherited them; anything
		 * else is another tool's.
		 */
		if (err == EBUSY &&
		    thread_start_ticks(pt->cfg.tgid, t->tid) >= pt->attach_boot_ticks) {
			pt->inherited++;
			if (sb_fd >= 0)
				close(sb_fd); /* inherited with the PT event: a second is noise */
			return 0;
		}
		if (sb_fd >= 0)
			close(sb_fd);
		if (err == EBUSY)
			return ht_fail(
				"Intel PT is in use by another tool on CPU %u (perf record "
				"-e intel_pt, another hybtrace, a debugger): stop it, or use "
				"--source sample",
				cpu);
		return open_error("an Intel PT event", t->tid, cpu, err);
	}
	if (sb_fd >= 0 && attach_sideband(pt, t, cpu, sb_fd)) {
		close(fd);
		return -1;
	}
	if (pt->areas[cpu].fd < 0) {
		if (map_area(pt, cpu, fd, t->tid)) {
			close(fd);
			return -1;
		}
	} else {
		t->pt_fds[cpu] = fd;
		if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, pt->areas[cpu].fd))
			return ht_fail("cannot share CPU %u's Intel PT area: %s", cpu,
				       strerror(errno));
	}
	/* Children cloned while it was off are enabled with it. */
	if (ioctl(fd, PERF_EVENT_IOC_ENABLE, 0))
		return ht_fail("cannot enable the Intel PT event of tid %d on CPU %u: %s", t->tid,
			       cpu, strerror(errno));
	return 0;
}

/* Events for one thread on every CPU; the first ones own the areas and rings. */
static int open_thread(struct ht_intelpt *pt, int tid)
{
	struct ht_intelpt_thread *t;

	if (find_thread(pt, tid))
		return 0;
	t = add_thread(pt, tid);
	if (!t)
		return ht_fail("out of memory");
	for (unsigned int cpu = 0; cpu < pt->ncpus; cpu++) {
		int sb_fd, rc;

		if (!pt->cpu_online[cpu])
			continue;
		if (open_sideband(tid, cpu, &sb_fd))
			return -1;
		if (sb_fd < 0)
			return 0; /* it exited meanwhile */
		if (pt->cfg.sideband_only) {
			if (attach_sideband(pt, t, cpu, sb_fd))
				return -1;
			continue;
		}
		rc = open_pt_event(pt, t, cpu, sb_fd);
		if (rc < 0)
			return -1;
		if (rc > 0)
			return 0; /* it exited meanwhile */
	}
	return 0;
}

/* ht_proc_cover_threads()'s callback: a capture opened on each thread not yet covered. */
static int cover_thread(void *ctx, int tid)
{
	struct ht_intelpt *pt = ctx;

	if (find_thread(pt, tid))
		return 0;
	return open_thread(pt, tid) ? -1 : 1;
}

static int check_sizes(struct ht_intelpt_config *cfg, unsigned int online)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), need;

	if (!cfg->aux_bytes)
		cfg->aux_bytes = HT_INTELPT_DEFAULT_AUX_BYTES;
	if (!cfg->sideband_bytes)
		cfg->sideband_bytes = HT_INTELPT_SIDEBAND_BYTES;
	if (!is_pow2(cfg->aux_bytes) || cfg->aux_bytes < MIN_AUX_PAGES * page)
		return ht_fail("--pt-size must be a power of two of at least %" PRIu64 "k",
			       MIN_AUX_PAGES * page / 1024);
	if (!is_pow2(cfg->sideband_bytes) || cfg->sideband_bytes < page)
		return ht_fail("the sideband ring must be a power of two of at least %" PRIu64
			       " bytes",
			       page);
	need = ht_intelpt_memory_needed(cfg->aux_bytes, cfg->sideband_bytes, online,
					cfg->sideband_only);
	if (cfg->memory_budget_bytes && need > cfg->memory_budget_bytes)
		return ht_fail("Intel PT needs %" PRIu64 "M (%u CPUs x %" PRIu64 "k of PT area and "
			       "sideband), more than the memory budget of %" PRIu64 "M: lower "
			       "--pt-size or raise --max-memory",
			       need >> 20, online, (need / online) >> 10,
			       cfg->memory_budget_bytes >> 20);
	return 0;
}

static void read_attach_maps(struct ht_intelpt *pt);

int ht_intelpt_open(struct ht_intelpt *pt, const struct ht_intelpt_config *cfg)
{
	long nconf = sysconf(_SC_NPROCESSORS_CONF);
	unsigned int online = 0;

	memset(pt, 0, sizeof(*pt));
	pt->cfg = *cfg;
	if (nconf <= 0)
		return ht_fail("cannot count CPUs");
	if (cfg->tgid <= 0)
		return ht_fail("Intel PT capture needs a target pid");
	if (!cfg->sideband_only) {
		if (ht_intelpt_pmu_read(cfg->sysroot, &pt->pmu) ||
		    ht_intelpt_build_config(&pt->pmu, &cfg->request, &pt->fields, &pt->config))
			return -1;
	}
	pt->ncpus = (unsigned int)nconf;
	pt->cpu_online = calloc(pt->ncpus, sizeof(*pt->cpu_online));
	pt->areas = calloc(pt->ncpus, sizeof(*pt->areas));
	pt->rings = calloc(pt->ncpus, sizeof(*pt->rings));
	pt->open = true;
	if (!pt->cpu_online || !pt->areas || !pt->rings) {
		ht_fail("out of memory");
		goto fail;
	}
	for (unsigned int c = 0; c < pt->ncpus; c++)
		pt->areas[c].fd = pt->rings[c].fd = -1;
	read_online(pt->cpu_online, pt->ncpus);
	for (unsigned int c = 0; c < pt->ncpus; c++)
		online += pt->cpu_online[c];
	if (check_sizes(&pt->cfg, online ? online : 1))
		goto fail;
	ht_cpuid_read(&pt->cpuid);
	if (ht_reserve_fds(ht_intelpt_fds_needed(ht_proc_count_threads(cfg->tgid) * 2, pt->ncpus),
			   "Intel PT capture"))
		goto fail;
	pt->attach_boot_ticks = boot_ticks_now();
	if (ht_proc_cover_threads(cfg->tgid, cover_thread, pt, false))
		goto fail;
	ht_clock_pair_take(&pt->attach_pair, CLOCK_PAIR_TRIES, HT_CLOCK_AT_ATTACH);
	read_attach_maps(pt);
	return 0;
fail:
	ht_intelpt_close(pt);
	return -1;
}

struct ht_build_id_entry {
	uint32_t dev_major, dev_minor;
	uint64_t inode;
	char *path;
	char *build_id; /* NULL: the file has none, or could not be read */
};

static void free_rawcap_maps(struct ht_rawcap_maps *m)
{
	for (size_t i = 0; i < m->count; i++) {
		free(m->v[i].path);
		free(m->v[i].build_id);
	}
	free(m->v);
	memset(m, 0, sizeof(*m));
}

void ht_intelpt_close(struct ht_intelpt *pt)
{
	if (!pt->open)
		return;
	for (size_t i = 0; i < pt->nthreads; i++) {
		for (unsigned int c = 0; c < pt->ncpus; c++) {
			if (pt->threads[i].pt_fds[c] >= 0)
				close(pt->threads[i].pt_fds[c]);
			if (pt->threads[i].sb_fds[c] >= 0)
				close(pt->threads[i].sb_fds[c]);
		}
		free(pt->threads[i].pt_fds);
		free(pt->threads[i].sb_fds);
	}
	for (unsigned int c = 0; pt->areas && c < pt->ncpus; c++) {
		struct ht_intelpt_area *a = &pt->areas[c];

		if (a->aux)
			munmap(a->aux, a->aux_len);
		if (a->base)
			munmap(a->base, a->base_len);
		if (a->fd >= 0)
			close(a->fd);
	}
	for (unsigned int c = 0; pt->rings && c < pt->ncpus; c++) {
		struct ht_intelpt_sbring *r = &pt->rings[c];

		if (r->base)
			munmap(r->base, r->mmap_len);
		if (r->fd >= 0)
			close(r->fd);
	}
	for (size_t i = 0; i < pt->nbuild_ids; i++) {
		free(pt->build_ids[i].path);
		free(pt->build_ids[i].build_id);
	}
	free(pt->build_ids);
	free_rawcap_maps(&pt->attach_maps);
	free(pt->threads);
	free(pt->areas);
	free(pt->rings);
	free(pt->cpu_online);
	memset(pt, 0, sizeof(*pt));
}

void ht_intelpt_reap(struct ht_intelpt *pt)
{
	size_t out = 0;

	for (size_t i = 0; i < pt->nthreads; i++) {
		struct ht_intelpt_thread *t = &pt->threads[i];

		if (thread_alive(pt->cfg.tgid, t->tid)) {
			pt->threads[out++] = *t;
			continue;
		}
		/* Owners stay open: their areas still take inherited threads' trace. */
		for (unsigned int c = 0; c < pt->ncpus; c++) {
			if (t->pt_fds[c] >= 0)
				close(t->pt_fds[c]);
			if (t->sb_fds[c] >= 0)
				close(t->sb_fds[c]);
		}
		free(t->pt_fds);
		free(t->sb_fds);
	}
	pt->nthreads = out;
}

/* ---- mappings, build-ids, vdso ---- */

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
static int read_exec_maps(struct ht_intelpt *pt, const struct ht_maps *maps,
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
			free_rawcap_maps(out);
			return ht_fail("out of memory");
		}
	}
	return 0;
}

static void read_attach_maps(struct ht_intelpt *pt)
{
	struct ht_target target;
	struct ht_maps maps;

	if (ht_maps_read(pt->cfg.tgid, &maps))
		return; /* the freeze reads them again */
	ht_target_init(&target, pt->cfg.tgid);
	ht_target_reopen_root(&target);
	if (read_exec_maps(pt, &maps, &target, &pt->attach_maps))
		memset(&pt->attach_maps, 0, sizeof(pt->attach_maps));
	ht_target_close(&target);
	ht_maps_free(&maps);
}

/* The target's vdso: its own bytes through /proc/PID/mem, else ours when the size matches. */
static int copy_vdso(const struct ht_maps *maps, const struct ht_target *target,
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

static int copy_maps(struct ht_rawcap_maps *dst, const struct ht_rawcap_maps *src)
{
	memset(dst, 0, sizeof(*dst));
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

static void read_comm(int pid, char *comm, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/comm", pid);
	if (read_text(path, comm, len))
		comm[0] = 0;
}

/* ---- freeze ---- */

static void set_all(struct ht_intelpt *pt, unsigned int cpu, unsigned long request)
{
	ioctl(pt->areas[cpu].fd, request, 0);
	for (size_t i = 0; i < pt->nthreads; i++)
		if (pt->threads[i].pt_fds[cpu] >= 0)
			ioctl(pt->threads[i].pt_fds[cpu], request, 0);
}

static void note_frozen(uint64_t now, uint64_t *first, uint64_t *last)
{
	if (!*first)
		*first = now;
	*last = now;
}

/* Disable, copy, enable every area. Every area is enabled again whatever happens. */
static int freeze_areas(struct ht_intelpt *pt, struct ht_rawcap *out, uint64_t *first,
			uint64_t *last)
{
	uint64_t *frozen = calloc(pt->ncpus, sizeof(*frozen));
	int rc = 0;

	out->streams = calloc(pt->ncpus, sizeof(*out->streams));
	if (!frozen || !out->streams) {
		free(frozen);
		return ht_fail("out of memory freezing Intel PT");
	}
	/* Every area first, so the last one stops as soon after the trigger as can be. */
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		if (!pt->areas[c].aux)
			continue;
		set_all(pt, c, PERF_EVENT_IOC_DISABLE);
		frozen[c] = clock_ns(CLOCK_MONOTONIC);
		note_frozen(frozen[c], first, last);
	}
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		struct ht_intelpt_area *a = &pt->areas[c];
		struct perf_event_mmap_page *pg = a->base;
		struct ht_rawcap_stream *s;
		uint64_t head;

		if (!a->aux)
			continue;
		head = __atomic_load_n(&pg->aux_head, __ATOMIC_ACQUIRE);
		if (!rc) {
			s = &out->streams[out->nstreams];
			s->data = malloc(a->aux_len);
			if (s->data) {
				s->cpu = c;
				s->tid = a->tid;
				s->ring_bytes = a->aux_len;
				s->aux_head = head;
				s->frozen_ns = frozen[c];
				s->len = ht_intelpt_ring_copy(a->aux, a->aux_len, head, s->data);
				out->nstreams++;
			} else {
				rc = ht_fail("out of memory copying the Intel PT area of CPU %u",
					     c);
			}
		}
		set_all(pt, c, PERF_EVENT_IOC_ENABLE);
	}
	free(frozen);
	return rc;
}

static int freeze_sideband(struct ht_intelpt *pt, struct ht_rawcap *out, uint64_t *first,
			   uint64_t *last)
{
	out->sidebands = calloc(pt->ncpus, sizeof(*out->sidebands));
	if (!out->sidebands)
		return ht_fail("out of memory copying the sideband");
	for (unsigned int c = 0; c < pt->ncpus; c++) {
		struct ht_intelpt_sbring *r = &pt->rings[c];
		struct perf_event_mmap_page *pg = r->base;
		struct ht_rawcap_sideband *s = &out->sidebands[out->nsidebands];
		size_t len;
		uint64_t head;
		int rc;

		if (!r->base)
			continue;
		/* Paused only while it is copied. */
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 1);
		s->frozen_ns = clock_ns(CLOCK_MONOTONIC);
		head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
		rc = ht_perf_backward_linearize((const uint8_t *)r->base + pg->data_offset,
						r->data_size, head, &s->data, &len);
		ioctl(r->fd, PERF_EVENT_IOC_PAUSE_OUTPUT, 0);
		if (rc)
			return -1;
		if (pt->cfg.sideband_only)
			note_frozen(s->frozen_ns, first, last);
		s->cpu = c;
		s->len = len;
		out->nsidebands++;
	}
	return 0;
}

static void fill_config(const struct ht_intelpt *pt, struct ht_rawcap *out)
{
	struct ht_rawcap_pt_config *c = &out->pt;

	c->pmu_type = pt->pmu.type;
	c->config = pt->config;
	c->fields = pt->fields;
	c->aux_bytes = pt->cfg.sideband_only ? 0 : pt->cfg.aux_bytes;
	c->sideband_sample_type = HT_INTELPT_SIDEBAND_SAMPLE_TYPE;
	c->has_max_nonturbo_ratio = pt->pmu.has_max_nonturbo_ratio;
	c->max_nonturbo_ratio = pt->pmu.max_nonturbo_ratio;
	c->has_tsc_art_ratio = pt->pmu.has_tsc_art_ratio;
	c->tsc_art_num = pt->pmu.tsc_art_num;
	c->tsc_art_den = pt->pmu.tsc_art_den;
	out->cpuid = pt->cpuid;
	for (unsigned int cpu = 0; cpu < pt->ncpus; cpu++) {
		void *page = pt->areas[cpu].base ? pt->areas[cpu].base : pt->rings[cpu].base;

		if (page) {
			read_time_conv(page, &out->time_conv);
			break;
		}
	}
}

/* Mappings at attach and now, and the vdso. */
static int freeze_maps(struct ht_intelpt *pt, struct ht_rawcap *out)
{
	struct ht_target target;
	struct ht_maps maps;
	int rc = 0;

	out->maps = calloc(2, sizeof(*out->maps));
	if (!out->maps)
		return ht_fail("out of memory");
	if (pt->attach_maps.count) {
		if (copy_maps(&out->maps[0], &pt->attach_maps)) {
			out->nmaps = 1;
			return ht_fail("out of memory");
		}
		out->nmaps = 1;
	}
	/* A target that just exited leaves the attach-time mappings only. */
	if (ht_maps_read(pt->cfg.tgid, &maps))
		return 0;
	ht_target_init(&target, pt->cfg.tgid);
	ht_target_reopen_root(&target);
	rc = read_exec_maps(pt, &maps, &target, &out->maps[out->nmaps]);
	if (!rc)
		out->nmaps++;
	if (!rc)
		rc = copy_vdso(&maps, &target, out);
	ht_target_close(&target);
	ht_maps_free(&maps);
	return rc;
}

int ht_intelpt_freeze(struct ht_intelpt *pt, uint64_t trigger_ns, struct ht_rawcap *out)
{
	uint64_t first = 0, last = 0;
	struct ht_clock_pair now;

	memset(out, 0, sizeof(*out));
	if (!pt->open)
		return ht_fail("Intel PT capture is not open");
	out->trigger_ns = trigger_ns;
	if (!pt->cfg.sideband_only && freeze_areas(pt, out, &first, &last))
		goto fail;
	if (freeze_sideband(pt, out, &first, &last))
		goto fail;
	out->freeze_first_ns = first > trigger_ns ? first - trigger_ns : 0;
	out->freeze_last_ns = last > trigger_ns ? last - trigger_ns : 0;
	ht_clock_pair_take(&now, CLOCK_PAIR_TRIES, HT_CLOCK_AT_FREEZE);
	out->clocks = calloc(2, sizeof(*out->clocks));
	if (!out->clocks) {
		ht_fail("out of memory");
		goto fail;
	}
	out->clocks[out->nclocks++] = pt->attach_pair;
	out->clocks[out->nclocks++] = now;
	out->snap_mono_ns = clock_ns(CLOCK_MONOTONIC);
	out->snap_boot_ns = clock_ns(CLOCK_BOOTTIME);
	out->snap_real_ns = clock_ns(CLOCK_REALTIME);
	out->pid = pt->cfg.tgid;
	read_comm(pt->cfg.tgid, out->comm, sizeof(out->comm));
	fill_config(pt, out);
	if (freeze_maps(pt, out))
		goto fail;
	return 0;
fail:
	ht_rawcap_free(out);
	return -1;
}
