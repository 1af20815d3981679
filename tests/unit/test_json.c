// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON writer, and the breach line written through it: byte for byte
 * what hybtrace printed before the writer (the expected lines below were
 * printed by the hand-written fprintf code it replaced).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "base/json.h"
#include "kernel/breach_format.h"

static char *text;
static size_t text_len;

static FILE *open_text(void)
{
	free(text);
	text = NULL;
	return open_memstream(&text, &text_len);
}

TEST(nested_members_numbers_and_escapes)
{
	struct ht_json j;
	FILE *f = open_text();

	CHECK(f != NULL);
	if (!f)
		return;
	ht_json_begin(&j, f);
	ht_json_str(&j, "type", "t\"\\\n\t\x01\x7f");
	ht_json_u64(&j, "max", UINT64_MAX);
	ht_json_u64(&j, "zero", 0);
	ht_json_i64(&j, "min", INT64_MIN);
	ht_json_i64(&j, "neg", -14);
	ht_json_fixed(&j, "s", 1.23456789, 6);
	ht_json_fixed(&j, "r", 2.0, 3);
	ht_json_array(&j, "empty");
	ht_json_close(&j);
	ht_json_array(&j, "a");
	ht_json_object(&j, NULL);
	ht_json_bool(&j, "b", true);
	ht_json_null(&j, "n");
	ht_json_close(&j);
	ht_json_str(&j, NULL, NULL);
	ht_json_object(&j, NULL);
	ht_json_close(&j);
	ht_json_close(&j);
	ht_json_object(&j, "o");
	ht_json_bool(&j, "f", false);
	ht_json_close(&j);
	ht_json_end_line(&j);
	fclose(f);
	CHECK_STR(text, "{\"type\":\"t\\\"\\\\\\n\\t\\u0001\\u007f\",\"max\":18446744073709551615,"
			"\"zero\":0,\"min\":-9223372036854775808,\"neg\":-14,\"s\":1.234568,"
			"\"r\":2.000,\"empty\":[],\"a\":[{\"b\":true,\"n\":null},null,{}],"
			"\"o\":{\"f\":false}}\n");
}

TEST(members_continue_an_object_the_caller_opened)
{
	struct ht_json j;
	FILE *f = open_text();

	CHECK(f != NULL);
	if (!f)
		return;
	fputs("{\"a\":1", f);
	ht_json_continue(&j, f);
	ht_json_u64(&j, "b", 2);
	fputc('}', f);
	fclose(f);
	CHECK_STR(text, "{\"a\":1,\"b\":2}");
}

/* `report DIR --json`: a document that is an array; a dump's metadata, whose keys are data. */
TEST(an_array_document_and_keys_that_are_data)
{
	struct ht_json j;
	FILE *f = open_text();

	CHECK(f != NULL);
	if (!f)
		return;
	ht_json_begin_array(&j, f);
	ht_json_object(&j, NULL);
	ht_json_object(&j, "metadata");
	ht_json_data_str(&j, "hybtrace.kind", "rq-delay");
	ht_json_data_str(&j, "k\"\n", "v\t");
	ht_json_close(&j);
	ht_json_close(&j);
	ht_json_object(&j, NULL);
	ht_json_close(&j);
	ht_json_end_line(&j);
	ht_json_begin_array(&j, f);
	ht_json_end_line(&j);
	fclose(f);
	CHECK_STR(text, "[{\"metadata\":{\"hybtrace.kind\":\"rq-delay\",\"k\\\"\\n\":\"v\\t\"}},{}]\n"
			"[]\n");
}

static const char *breach_line(const struct ht_breach_info *bi)
{
	FILE *f = open_text();

	if (!f)
		return "";
	ht_breach_print_json(f, bi, NULL);
	fclose(f);
	return text;
}

TEST(a_breach_line_with_every_part)
{
	static struct ht_block_frames fr;
	struct ht_breach_info bi = {
		.b = {.kind = HT_BREACH_SYSCALL,
		      .tid = 4001,
		      .tgid = 4000,
		      .cpu = 1,
		      .start_ns = 1000000,
		      .end_ns = 21000000,
		      .wake_ns = 19800000,
		      .state = 1,
		      .syscall_nr = 0,
		      .syscall_ret = -11,
		      .wake_source = HT_WAKE_TASK,
		      .waker_tid = 4002,
		      .waker_tgid = 4000,
		      .wake_cpu = 0,
		      .flags = HT_BRF_JOINED | HT_BRF_WAKEUP_UNTRACED | HT_BRF_SWITCH_IN_UNTRACED,
		      .comm = "wor\"ker",
		      .waker_comm = "waker",
		      .kstack_bytes = 2 * 8,
		      .kstack = {0xffffffff81000000ULL, 0x10},
		      .kinds = HT_KIND_BIT(HT_BREACH_OFF_CPU) | HT_KIND_BIT(HT_BREACH_SYSCALL),
		      .off_cpu_waits = 2,
		      .off_cpu_start_ns = 1500000,
		      .off_cpu_end_ns = 19800000,
		      .off_cpu_threshold_ns = 5000000},
		.threshold_ns = 10000000,
		.since_start_s = 12.3456789,
		.have_culprits = true,
		.culprits = {.top = {{.pid = 9000, .cpu = 1, .ns = 1000000},
				     {.pid = 9001, .cpu = 0, .ns = 500}},
			     .count = 2,
			     .other_ns = 7,
			     .unknown_ns = 200000,
			     .idle_ns = 3,
			     .runnable_ns = 1200000,
			     .preemptions = 1},
		.block_stack = &fr,
		.block_stack_missing = "never\tblocked",
		.process_comm = "ser\"ver",
	};

	snprintf(bi.culprit_comm[0], sizeof(bi.culprit_comm[0]), "fifo_hog");
	snprintf(bi.culprit_comm[1], sizeof(bi.culprit_comm[1]), "a\\b");
	fr.switch_ns = 1234;
	fr.error = -14;
	fr.depth = 2;
	snprintf(fr.f[0].function, sizeof(fr.f[0].function), "f0");
	snprintf(fr.f[1].function, sizeof(fr.f[1].function), "f\"1");
	CHECK_STR(breach_line(&bi),
		  "{\"type\":\"breach\",\"time_s\":12.345679,\"kind\":\"syscall\",\"duration_ns"
		  "\":20000000,\"threshold_ns\":10000000,\"start_ns\":1000000,\"end_ns\":210000"
		  "00,\"pid\":4000,\"tid\":4001,\"comm\":\"wor\\\"ker\",\"process_comm\":\"ser"
		  "\\\"ver\",\"kinds\":[\"off-cpu\",\"syscall\"],\"off_cpu\":{\"start_ns\":1500000,\"end_ns\":19800000,\"duratio"
		  "n_ns\":18300000,\"threshold_ns\":5000000,\"waits_over_threshold\":2},\"cpu\""
		  ":1,\"state\":\"S\",\"wake_cpu\":0,\"syscall_nr\":0,\"syscall\":\"read\",\"sy"
		  "scall_ret\":-11,\"syscall_ret_name\":\"EAGAIN\",\"wait_for_work\":false,\"wo"
		  "ken_by\":{\"source\":\"task\",\"at_ns\":19800000,\"tid\":4002,\"pid\":4000,"
		  "\"comm\":\"waker\",\"exiting\":true},\"not_traced\":[\"wakeup\",\"switch-in\"],"
		  "\"ran_instead\":[{\"pid\":9000,\"comm\""
		  ":\"fifo_hog\",\"cpu\":1,\"ns\":1000000},{\"pid\":9001,\"comm\":\"a\\\\b\",\""
		  "cpu\":0,\"ns\":500}],\"ran_instead_other_ns\":7,\"ran_instead_unknown_ns\":2"
		  "00000,\"ran_instead_idle_ns\":3,\"runnable_ns\":1200000,\"preemptions\":1,\""
		  "kernel_stack\":[\"[kernel]+0xffffffff81000000\",\"[kernel]+0x10\"],\"block_s"
		  "tack\":[\"f0\",\"f\\\"1\"],\"block_stack_at_ns\":1234,\"block_stack_error\":"
		  "-14,\"block_stack_missing\":\"never\\tblocked\"}\n");
}

TEST(the_text_line_says_what_the_kernel_did_not_trace_in_words)
{
	struct ht_breach_info bi = {
		.b = {.kind = HT_BREACH_OFF_CPU, .tid = 1, .tgid = 1, .state = 1, .comm = "w",
		      .flags = HT_BRF_WAKEUP_UNTRACED | HT_BRF_SWITCH_IN_UNTRACED},
		.threshold_ns = 1000,
	};
	FILE *f = open_text();

	CHECK(f != NULL);
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	fclose(f);
	CHECK(strstr(text, " (the kernel did not trace its wakeup and switch-in)") != NULL);
	bi.b.flags = HT_BRF_SWITCH_IN_UNTRACED;
	f = open_text();
	if (!f)
		return;
	ht_breach_print_text(f, &bi);
	fclose(f);
	CHECK(strstr(text, " (the kernel did not trace its switch-in)") != NULL);
}

TEST(a_breach_line_with_the_fewest_parts)
{
	struct ht_breach_info bi = {
		.b = {.kind = HT_BREACH_RQ_DELAY,
		      .tid = 7,
		      .tgid = 7,
		      .start_ns = 5,
		      .end_ns = 9,
		      .state = 0,
		      .syscall_nr = -1,
		      .wake_source = HT_WAKE_NONE,
		      .comm = "x",
		      .kstack_bytes = -14},
		.threshold_ns = 1,
		.since_start_s = 0.0000004,
	};

	CHECK_STR(breach_line(&bi),
		  "{\"type\":\"breach\",\"time_s\":0.000000,\"kind\":\"rq-delay\",\"duration_ns"
		  "\":4,\"threshold_ns\":1,\"start_ns\":5,\"end_ns\":9,\"pid\":7,\"tid\":7,\"co"
		  "mm\":\"x\",\"process_comm\":\"x\",\"kinds\":[\"rq-delay\"],\"cpu\":0,\"state\":\"R\",\"wake_cpu\":0"
		  ",\"wait_for_work\":false,\"woken_by\":null,\"not_traced\":[],\"kernel_stack\":[]}\n");
	bi.b.kind = HT_BREACH_SYSCALL;
	bi.b.syscall_nr = 100000;
	bi.b.syscall_ret = 3;
	bi.b.wake_source = HT_WAKE_SOFTIRQ;
	bi.b.softirq_vec = 3;
	CHECK_STR(breach_line(&bi),
		  "{\"type\":\"breach\",\"time_s\":0.000000,\"kind\":\"syscall\",\"duration_ns"
		  "\":4,\"threshold_ns\":1,\"start_ns\":5,\"end_ns\":9,\"pid\":7,\"tid\":7,\"co"
		  "mm\":\"x\",\"process_comm\":\"x\",\"kinds\":[\"syscall\"],\"cpu\":0,\"state\":\"R\",\"wake_cpu\":0,"
		  "\"syscall_nr\":100000,\"syscall\":null,\"syscall_ret\":3,\"syscall_ret_name"
		  "\":null,\"wait_for_work\":false,\"woken_by\":{\"source\":\"softirq\",\"at_ns"
		  "\":0,\"softirq\":\"net_rx\"},\"not_traced\":[],\"kernel_stack\":[]}\n");
	bi.b.waker_tid = 12;
	bi.b.wake_source = HT_WAKE_SOFTIRQ;
	CHECK_STR(breach_line(&bi),
		  "{\"type\":\"breach\",\"time_s\":0.000000,\"kind\":\"syscall\",\"duration_ns"
		  "\":4,\"threshold_ns\":1,\"start_ns\":5,\"end_ns\":9,\"pid\":7,\"tid\":7,\"co"
		  "mm\":\"x\",\"process_comm\":\"x\",\"kinds\":[\"syscall\"],\"cpu\":0,\"state\":\"R\",\"wake_cpu\":0,"
		  "\"syscall_nr\":100000,\"syscall\":null,\"syscall_ret\":3,\"syscall_ret_name"
		  "\":null,\"wait_for_work\":false,\"woken_by\":{\"source\":\"softirq\",\"at_ns"
		  "\":0,\"softirq\":\"net_rx\",\"tid\":12,\"pid\":0,\"comm\":\"\",\"exiting\":f"
		  "alse},\"not_traced\":[],\"kernel_stack\":[]}\n");
}
