// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The intel_pt PMU: what sysfs says of it (caps, format terms), the config
 * and the perf_event_attrs built from a request, and what `hybtrace check`
 * says about it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include "sources/intelpt/intelpt_capture.h"
#include "sources/intelpt/intelpt_private.h"
#include "base/log.h"
#include "base/proc.h"

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

/* ---- sysfs ---- */

static const char *root_of(const char *sysroot)
{
	return sysroot && strcmp(sysroot, "/") ? sysroot : "";
}

/* A small sysfs file's text without its trailing newline: 0, -1 (errno set). */
int ht_intelpt_read_text(const char *path, char *buf, size_t len)
{
	size_t n;

	if (ht_read_small_file(path, buf, len))
		return -1;
	n = strlen(buf);
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
		if (ht_intelpt_read_text(path, text, sizeof(text))) {
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
	if (!ht_intelpt_read_text(path, text, sizeof(text))) {
		if (parse_uint(text, 10, UINT8_MAX, &v))
			return ht_fail("malformed %s: \"%s\"", path, text);
		pmu->has_max_nonturbo_ratio = true;
		pmu->max_nonturbo_ratio = (uint32_t)v;
	}
	snprintf(path, sizeof(path), "%s/tsc_art_ratio", dir);
	if (!ht_intelpt_read_text(path, text, sizeof(text))) {
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
	if (ht_intelpt_read_text(path, text, sizeof(text)))
		return ht_fail("cannot read %s: %s", path, strerror(errno));
	if (parse_uint(text, 10, UINT32_MAX, &v))
		return ht_fail("malformed %s: \"%s\"", path, text);
	pmu->type = (uint32_t)v;
	for (int t = 0; t < HT_PT_TERM_COUNT; t++) {
		snprintf(path, sizeof(path), "%s/format/%s", dir, term_names[t]);
		if (ht_intelpt_read_text(path, text, sizeof(text))) {
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
