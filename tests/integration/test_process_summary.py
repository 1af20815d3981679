# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Issue 17, downstream by process, for real: the summary's counts and histograms by process,
`report DIR --by-process`, and --max-dumps-per-process.

The workload is a shell running sleep_series processes side by side, each logging its sleeps
(pid, asked and slept time): with --off-cpu-syscalls clock_nanosleep each sleep is one
off-CPU breach of its process and nothing else of theirs breaches off-CPU. The summary is
checked against those logs and against the live breach and dump lines, never against itself.
"""
import json
import os
import subprocess
import tempfile

from harness import (HYBTRACE, check, hybtrace, hybtrace_knows, need_root, report_json, test,
                     tolerance_ns, workload)
from harness import Skip

# Each sleep breaches off-CPU once, in clock_nanosleep; the polls between two (1 ms) do not.
SLEEPS = ["--off-cpu", "15ms", "--off-cpu-syscalls", "clock_nanosleep", "--source", "none"]


def need_children():
    """Root, and hybtrace following a command's children (issue 17's targets)."""
    need_root()
    if not hybtrace_knows("--children"):
        raise Skip("hybtrace has no --children (issue 17's targets)")


def series_script(*series):
    """A shell that runs one sleep_series per (GAP_MS, "MS,MS...") side by side."""
    return " & ".join("%s %d %s" % (workload("sleep_series"), gap, ms) for gap, ms in series) + \
        " & wait"


def sleeps_by_pid(log):
    """{pid: [(asked_ns, start_ns, end_ns, slept_ns)]} from the workloads' logs."""
    asked, out = {}, {}
    for e in log:
        if e["event"] == "sleep_start":
            asked[(e["pid"], e["i"])] = e["delay_ns"]
        elif e["event"] == "sleep_end":
            out.setdefault(e["pid"], []).append((asked.get((e["pid"], e["i"]), 0),
                                                 e["start_ns"], e["ts_ns"], e["slept_ns"]))
    return out


def has_kind(b, kind):
    return b["kind"] == kind or kind in b.get("kinds", [])


def duration_of(b, kind):
    """The breach's interval for KIND (a syscall breach may carry an off-CPU one)."""
    if b["kind"] != kind and kind == "off-cpu" and "off_cpu_duration_ns" in b:
        return b["off_cpu_duration_ns"]
    return b["duration_ns"]


def hist_counts(hist):
    """{from_us: count} of one histogram as the JSON gives it."""
    return {b["from_us"]: b["count"] for b in hist}


def check_histograms_add_up(summary):
    """Every kind's buckets: the processes' and the others' sum to the session's."""
    procs, other = summary["processes"], summary["other_processes"]
    for kind, hist in summary["histograms"].items():
        total = {}
        for p in procs + [other]:
            for frm, n in hist_counts(p["histograms"].get(kind, [])).items():
                total[frm] = total.get(frm, 0) + n
        want = {frm: n for frm, n in hist_counts(hist).items() if n}
        got = {frm: n for frm, n in total.items() if n}
        check(got == want, "%s: the processes' histograms add up to %r, the session's is %r"
              % (kind, got, want))
        check(sum(want.values()) > 0, "no %s interval counted at all" % kind)


def largest_off_cpu(breaches, pid):
    """What a failure shows of PID's largest off-CPU breach: its times and what the kernel
    did not trace in it."""
    mine = [b for b in breaches if b["pid"] == pid and has_kind(b, "off-cpu")]
    if not mine:
        return "none"
    b = max(mine, key=lambda b: duration_of(b, "off-cpu"))
    return "%r" % {k: b.get(k) for k in ("start_ns", "end_ns", "off_cpu", "syscall", "state",
                                         "not_traced", "woken_by", "preemptions", "cpu")}


@test
def summary_counts_and_histograms_by_process():
    """Three processes breaching 4, 2 and 1 times: each one's counts, largest breach and
    off-CPU histogram in the summary match its log and its live breach lines; the
    processes' histograms add up to the session's, bucket by bucket."""
    need_children()
    series = [(1, "20,45,30,25"), (1, "60,35"), (1, "50")]
    run = hybtrace(["run", "--json", "--rq-delay", "5ms", "--max-dumps", "0"] + SLEEPS +
                   ["--", "sh", "-c", series_script(*series)], timeout=90)
    check(run.rc == 0, run.describe())
    sleeps = sleeps_by_pid(run.log)
    check(sorted(len(v) for v in sleeps.values()) == [1, 2, 4],
          "the workloads logged sleeps %r" % sleeps)
    summary = run.summary()
    check(summary and "processes" in summary, "no processes in the summary\n" + run.describe())
    lost = summary["lost"]["total"]
    breaches = run.breaches()
    procs = {p["pid"]: p for p in summary["processes"]}
    for pid, mine in sleeps.items():
        p = procs.get(pid)
        check(p, "no process %d in the summary: %r" % (pid, sorted(procs)))
        check(p["comm"] == "series" and p["running"] is False, "process %d: %r" % (pid, p))
        for kind in ("off-cpu", "rq-delay"):
            live = [b for b in breaches if b["pid"] == pid and has_kind(b, kind)]
            got = p["breaches"][kind]
            check(got["count"] == len(live), "pid %d: %d %s breaches in the summary, %d live"
                  % (pid, got["count"], kind, len(live)))
            if live:
                check(got["max_ns"] == max(duration_of(b, kind) for b in live) and
                      got["max_tid"] == pid,
                      "pid %d: largest %s %r, the live ones %r"
                      % (pid, kind, got, [duration_of(b, kind) for b in live]))
        # The workload's own account: a breach per sleep, the largest as long as its longest.
        off = p["breaches"]["off-cpu"]
        check(len(mine) - lost <= off["count"] <= len(mine),
              "pid %d: %d off-cpu breaches for %d sleeps (%d lost)"
              % (pid, off["count"], len(mine), lost))
        longest = max(mine, key=lambda s: s[0])
        check(longest[0] <= off["max_ns"] <= longest[3] + tolerance_ns(longest[3]),
              "pid %d: largest off-cpu %d ns, its longest sleep asked %d and took %d; its "
              "largest breach: %s; its sleeps (asked, start, end, slept): %r; lost %r, judged %r"
              % (pid, off["max_ns"], longest[0], longest[3],
                 largest_off_cpu(breaches, pid), mine, summary["lost"], summary["judged"]))
        # Each sleep is an off-CPU interval of its process of 16.384 ms or more.
        long_waits = sum(n for frm, n in hist_counts(p["histograms"]["off-cpu"]).items()
                         if frm >= 16384)
        check(long_waits >= len(mine), "pid %d's off-CPU histogram has %d intervals of 16 ms "
              "or more, for %d sleeps: %r" % (pid, long_waits, len(mine),
                                               p["histograms"]["off-cpu"]))
    # Every breach is some process's: the processes' counts add up to the session's.
    for kind in ("off-cpu", "rq-delay"):
        counted = sum(p["breaches"][kind]["count"] for p in summary["processes"])
        counted += summary["other_processes"]["breaches"][kind]["count"]
        check(counted == summary["breaches"][kind]["count"],
              "%s: %d by process, %d in all" % (kind, counted, summary["breaches"][kind]["count"]))
    check(summary["other_processes"]["intervals_without_slot"] == 0,
          "intervals without a slot: %r" % summary["other_processes"])
    check_histograms_add_up(summary)
    # The most breaches first.
    waits = [p["waits_breached"] for p in summary["processes"]]
    check(waits == sorted(waits, reverse=True), "not the most breaches first: %r" % waits)

    # In text: a block per process after the session's.
    text = hybtrace(["run", "--rq-delay", "off", "--max-dumps", "0"] + SLEEPS +
                    ["--", "sh", "-c", series_script(*series)], timeout=90)
    check(text.rc == 0, text.describe())
    four = [pid for pid, s in sleeps_by_pid(text.log).items() if len(s) == 4]
    check(len(four) == 1, "the workloads logged %r" % sleeps_by_pid(text.log))
    check("\nby process, the most breaches first (" in text.stdout and
          "\npid %d (series), exited: 4 waits breached: off-cpu 4, largest " % four[0]
          in text.stdout and
          "  off-CPU time of pid %d (series), log2 buckets:" % four[0] in text.stdout,
          "no block for pid %d in the text summary:\n%s" % (four[0], text.stdout[-4000:]))


@test
def processes_without_a_histogram_slot_are_counted():
    """One histogram slot for three processes (a test knob): the others' intervals count as
    without a slot, and everything still adds up; their breaches are still theirs."""
    need_children()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--max-dumps", "0"] + SLEEPS +
                   ["--", "sh", "-c", series_script((1, "20,25"), (1, "30"), (1, "35"))],
                   env={"HYBTRACE_TEST_PROC_HIST_SLOTS": "1"}, timeout=90)
    check(run.rc == 0, run.describe())
    summary = run.summary()
    other = summary["other_processes"]
    check(other["histogram_slots"] == 1 and other["intervals_without_slot"] > 0,
          "other processes %r" % other)
    check_histograms_add_up(summary)
    procs = {p["pid"]: p for p in summary["processes"]}
    for pid, mine in sleeps_by_pid(run.log).items():
        live = [b for b in run.breaches("off-cpu") if b["pid"] == pid]
        check(pid in procs and procs[pid]["breaches"]["off-cpu"]["count"] == len(live) > 0,
              "pid %d: %r, %d live breaches" % (pid, procs.get(pid), len(live)))


def dump_lines(run):
    return [o for o in run.json_lines() if o.get("type") == "dump"]


def replaced_paths(run):
    return {o["old"] for o in run.json_lines() if o.get("type") == "dump_replaced"}


@test
def report_groups_a_two_process_runs_dumps_by_process():
    """Two processes' breaches, each dumped: `report DIR --by-process` puts each dump under
    the process the live dump line named, worst first."""
    need_children()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--min-interval", "0ms",
                        "--max-dumps", "10", "--output", out] + SLEEPS +
                       ["--", "sh", "-c", series_script((300, "20,40"), (300, "55,30"))],
                       timeout=90)
        check(run.rc == 0, run.describe())
        written = dump_lines(run)
        gone = replaced_paths(run)
        want = {}
        for d in written:
            if d["path"] not in gone:
                want.setdefault(d["pid"], set()).add(d["path"])
        series = set(sleeps_by_pid(run.log))
        check(series <= set(want) and all(len(want[p]) >= 1 for p in series),
              "dumps by pid %r, the workloads %r\n%s" % (want, series, run.describe()))
        p = subprocess.run([HYBTRACE, "report", "--json", "--by-process", out],
                           capture_output=True, text=True, timeout=120)
        check(p.returncode == 0, "report --by-process: %s" % p.stderr)
        groups = json.loads(p.stdout)
        got = {g["pid"]: {r["file"] for r in g["dumps"]} for g in groups}
        check(got == want, "report grouped %r, the live dump lines say %r" % (got, want))
        for g in groups:
            if g["pid"] in series:
                check(g["process"] == "series", "pid %d is named %r" % (g["pid"], g["process"]))
            ratios = [r["duration_ns"] / r["threshold_ns"] for r in g["dumps"]]
            check(ratios == sorted(ratios, reverse=True), "pid %r not worst first: %r"
                  % (g["pid"], ratios))
        # The process with the worst dump first.
        worst = [max(r["duration_ns"] / r["threshold_ns"] for r in g["dumps"]) for g in groups]
        check(worst == sorted(worst, reverse=True), "groups not worst first: %r" % worst)
        p = subprocess.run([HYBTRACE, "report", "--by-process", out], capture_output=True,
                           text=True, timeout=120)
        for pid in series:
            check("pid %d (series): %d dump" % (pid, len(want[pid])) in p.stdout,
                  "no group of pid %d in:\n%s" % (pid, p.stdout))


@test
def max_dumps_per_process_keeps_each_process_worst():
    """--max-dumps-per-process 1, two processes breaching three times each, apart: one dump
    of each is left, of its worst breach (a worse one of a process replaced its own)."""
    need_children()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--min-interval", "0ms",
                        "--max-dumps-per-process", "1", "--output", out] + SLEEPS +
                       ["--", "sh", "-c", series_script((230, "20,40,30"), (230, "60,35,45"))],
                       timeout=90)
        check(run.rc == 0, run.describe())
        series = set(sleeps_by_pid(run.log))
        check(len(series) == 2, "the workloads logged %r" % run.log)
        kept = {}
        gone = replaced_paths(run)
        for d in dump_lines(run):
            if d["path"] not in gone:
                kept.setdefault(d["pid"], []).append(d["path"])
        files = sorted(os.path.join(out, f) for f in os.listdir(out)
                       if f.endswith(".perfetto-trace"))
        check(sorted(sum(kept.values(), [])) == files, "files %r, the dump lines keep %r"
              % (files, kept))
        check(all(len(v) == 1 for v in kept.values()) and series <= set(kept),
              "want one dump of each process, got %r\n%s" % (kept, run.describe()))
        s = run.summary()["dumps"]
        check(s["skipped"]["max_dumps_per_process"] >= 1 and s["replaced"] >= 1,
              "summary's dumps %r" % s)
        for pid in series:
            live = [b for b in run.breaches() if b["pid"] == pid]
            worst = max(live, key=lambda b: b["duration_ns"] / b["threshold_ns"])
            r = report_json(kept[pid][0])
            if s["skipped"]["busy"] == 0:
                check((r["start_ns"], r["end_ns"]) == (worst["start_ns"], worst["end_ns"]),
                      "pid %d's dump is of [%d, %d], its worst breach %r"
                      % (pid, r["start_ns"], r["end_ns"], worst))
            else:
                # A builder too slow passed some over: the one kept is still that process's.
                check(any((r["start_ns"], r["end_ns"]) == (b["start_ns"], b["end_ns"])
                          for b in live), "pid %d's dump is of none of its breaches" % pid)
