# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""One wait, one breach: a sleep inside a syscall that breaches the off-CPU and the syscall
thresholds is one breach of both kinds, one dump, counted once in the summary; checked
against the times the workload logs (tests/workloads/syscall_waits.c)."""
import glob
import os
import re
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Control, check, hybtrace, need_root, read_log,
                     report_json, test, tolerance_ns, wait_for, workload)
from perfetto_checks import check_dump

# Run-queue delays are not what these tests are about: a threshold they never reach.
QUIET = ["--rq-delay", "1s"]


def run_waits(off_cpu, syscall, *gaps, out):
    run = hybtrace(["run", "--json", "--off-cpu", off_cpu, "--syscall", syscall] + QUIET +
                   ["--output", out, "--", workload("syscall_waits")] + [str(g) for g in gaps])
    check(run.rc == 0, run.describe())
    start, end = run.events("wait_start"), run.events("wait_end")
    check(start and end, "the workload did not run:\n" + run.describe())
    return run, start[0], end[0], run.events("write")


def reader_breaches(run, start):
    """The reader's breaches that end after it logged the start of its wait (on a loaded
    machine its start-up may breach too)."""
    return [b for b in run.breaches() if b["tid"] == start["tid"] and
            b["end_ns"] > start["ts_ns"]]


def dumps_in(out):
    return sorted(glob.glob(os.path.join(out, "*.perfetto-trace")))


def check_waits(summary, off_cpu_only, syscall_only, both):
    w = summary["waits"]
    check((w["off_cpu_only"], w["syscall_only"], w["off_cpu_and_syscall"]) ==
          (off_cpu_only, syscall_only, both),
          "summary's waits %r, want %d off-cpu only, %d syscall only, %d both"
          % (w, off_cpu_only, syscall_only, both))
    check(w["breached"] == summary["reported"], "waits %r, reported %r" % (w, summary["reported"]))


@test
def sleep_in_read_is_one_breach_of_both_kinds():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run, start, end, writes = run_waits("10ms", "10ms", "pipe", 30, out=out)
        write = writes[0]
        mine = reader_breaches(run, start)
        check(len(mine) == 1, "want one breach of the read, got:\n" + run.describe())
        b = mine[0]
        check(b["kinds"] == ["off-cpu", "syscall"] and b["kind"] == "syscall" and
              b["syscall"] == "read", "kinds %r kind %r syscall %r" % (b["kinds"], b["kind"],
                                                                     b.get("syscall")))
        # The syscall: from after its start was logged to after the write, before its end.
        tol = tolerance_ns(30_000_000)
        check(start["ts_ns"] <= b["start_ns"] < write["ts_ns"] < b["end_ns"] <= end["ts_ns"],
              "read %d..%d, logged start %d, write %d, end %d" % (
                  b["start_ns"], b["end_ns"], start["ts_ns"], write["ts_ns"], end["ts_ns"]))
        # Its sleep: inside the syscall, from before the writer began its gap to past the write.
        off = b["off_cpu"]
        check(b["start_ns"] <= off["start_ns"] < off["end_ns"] <= b["end_ns"] and
              off["start_ns"] <= write["ts_ns"] - 30_000_000 + tol and
              off["end_ns"] > write["ts_ns"] and off["duration_ns"] >= 30_000_000 - tol and
              off["threshold_ns"] == 10_000_000 and off["waits_over_threshold"] == 1,
              "off-CPU part %r, write at %d" % (off, write["ts_ns"]))
        check((b["woken_by"] or {}).get("tid") == write["tid"], "woken by %r, writer %d"
              % (b["woken_by"], write["tid"]))
        check_waits(run.summary(), 0, 0, 1)
        dumps = dumps_in(out)
        check(len(dumps) == 1 and dumps[0].endswith("-off-cpu+syscall.perfetto-trace"),
              "want one dump of both kinds, got %r" % dumps)
        check_dump(dumps[0])
        r = report_json(dumps[0])
        check(r["kind"] == "off-cpu+syscall" and r["kinds"] == ["off-cpu", "syscall"] and
              r["metadata"]["dump_kind"] == "off-cpu+syscall" and
              r["off_cpu_duration_ns"] == off["duration_ns"] and
              r["off_cpu_threshold_ns"] == 10_000_000 and r["tid"] == start["tid"],
              "report of the dump: %r" % {k: r.get(k) for k in (
                  "kind", "kinds", "off_cpu_duration_ns", "off_cpu_threshold_ns", "tid")})
        # The dump's off-CPU slice ends at the wakeup, where its run-queue slice begins: at
        # its sched_waking, as the native thread state has it, up to the remote CPU's
        # interrupt before it was queued (woken_by.at_ns): hundreds of microseconds on this
        # guest, at most the 65.535 ms a flight record can carry (HT_FR_WAKE_DELAY_MAX_US).
        woken = b["woken_by"]["at_ns"]
        waking = [r["start_ns"] + x["t_ns"] for x in r["thread_states"]["states"]
                  if x["state"] == "R" and off["start_ns"] < r["start_ns"] + x["t_ns"] <= woken]
        check(waking and woken - waking[-1] <= 0xffff * 1000 and
              abs(r["off_cpu"]["ns"] - (waking[-1] - off["start_ns"])) <= 1000,
              "the dump's off-CPU slice %r, from %d; its R state from %r, queued at %d"
              % (r["off_cpu"], off["start_ns"], waking, woken))
        text = subprocess.run([HYBTRACE, "report", dumps[0]], capture_output=True, text=True,
                              timeout=60).stdout
        check(text.startswith("off-cpu+syscall ") and "of it (threshold 10.00ms)" in text,
              "report's headline:\n" + text[:400])


@test
def sleep_in_read_as_text():
    """The same wait in the text output: one line of both kinds, and the summary's count."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--off-cpu", "10ms", "--syscall", "10ms"] + QUIET +
                       ["--output", out, "--", workload("syscall_waits"), "pipe", "30"])
        check(run.rc == 0, run.describe())
        reader, writer = run.events("wait_start")[0]["tid"], run.events("write")[0]["tid"]
        lines = [l for l in run.stdout.splitlines() if " tid %d (reader) " % reader in l]
        check(len(lines) == 1 and re.match(
            r"\d+\.\d{6} off-cpu\+syscall \S+ms tid %d \(reader\) cpu \d+: read = 1, "
            r"off-cpu \S+ms in state S; woken by %d \(writer\)"
            # On a busy machine the reader may queue after its wakeup, and be preempted on its
            # way out: what ran then follows.
            r"(; then runnable \S+(, preempted (once|\d+ times))?: ran instead .+)?$"
            % (reader, writer), lines[0]),
            "the reader's lines:\n%s" % "\n".join(lines) + "\n" + run.describe())
        check("  waits: 1 breached: 0 rq-delay, 0 off-cpu only, 0 syscall only, "
              "1 both (off-cpu and syscall)\n" in run.stdout, "summary:\n" + run.stdout)


@test
def short_sleeps_in_a_long_syscall_are_one_syscall_breach():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        # Ten bytes, 3 ms apart, in one MSG_WAITALL receive: ten short sleeps, 30 ms. The
        # off-CPU threshold leaves a loaded machine 47 ms of delay in any one of them.
        run, start, end, writes = run_waits("50ms", "20ms", "sock", *[3] * 10, out=out)
        mine = reader_breaches(run, start)
        check(len(mine) == 1 and mine[0]["kinds"] == ["syscall"] and
              mine[0]["syscall"] == "recvfrom" and "off_cpu" not in mine[0],
              "want one syscall breach of the receive, got:\n" + run.describe())
        b = mine[0]
        check(b["start_ns"] < writes[0]["ts_ns"] and writes[-1]["ts_ns"] < b["end_ns"] and
              b["syscall_ret"] == 10, "receive %d..%d = %d, writes %d..%d" % (
                  b["start_ns"], b["end_ns"], b["syscall_ret"], writes[0]["ts_ns"],
                  writes[-1]["ts_ns"]))
        check_waits(run.summary(), 0, 1, 0)
        dumps = dumps_in(out)
        check(len(dumps) == 1 and dumps[0].endswith("-syscall.perfetto-trace"),
              "want one syscall dump, got %r" % dumps)


@test
def the_longest_sleep_of_a_syscall_is_its_off_cpu_part():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        # Three sleeps over the threshold in one receive: the 40 ms one, not the last.
        run, start, end, writes = run_waits("10ms", "10ms", "sock", 15, 40, 12, out=out)
        mine = reader_breaches(run, start)
        check(len(mine) == 1, "want one breach of the receive, got:\n" + run.describe())
        b, tol = mine[0], tolerance_ns(40_000_000)
        off = b["off_cpu"]
        check(b["kinds"] == ["off-cpu", "syscall"] and off["waits_over_threshold"] == 3,
              "kinds %r, off-CPU part %r" % (b["kinds"], off))
        # The second sleep: begun after the first byte was taken, ended by the second byte.
        asleep = run.events("asleep_again")[0]["ts_ns"]
        check(writes[0]["ts_ns"] < off["start_ns"] < asleep < writes[1]["ts_ns"] <
              off["end_ns"] < writes[2]["ts_ns"] and off["duration_ns"] >= 40_000_000 - tol,
              "off-CPU part %r, writes at %r, asleep again at %d" % (
                  off, [w["ts_ns"] for w in writes], asleep))
        check_waits(run.summary(), 0, 0, 1)
        check(len(dumps_in(out)) == 1, "want one dump, got %r" % dumps_in(out))


@test
def sleep_under_the_syscall_threshold_is_an_off_cpu_breach():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run, start, end, writes = run_waits("10ms", "100ms", "pipe", 30, out=out)
        mine = reader_breaches(run, start)
        check(len(mine) == 1 and mine[0]["kind"] == "off-cpu" and
              mine[0]["kinds"] == ["off-cpu"] and mine[0]["syscall"] == "read",
              "want one off-cpu breach in read, got:\n" + run.describe())
        b = mine[0]
        check(b["start_ns"] < writes[0]["ts_ns"] < b["end_ns"] <= end["ts_ns"] and
              b["off_cpu"]["start_ns"] == b["start_ns"] and
              b["off_cpu"]["end_ns"] == b["end_ns"], "breach %r, write %d" % (
                  b, writes[0]["ts_ns"]))
        check((b["woken_by"] or {}).get("tid") == writes[0]["tid"], "woken by %r"
              % b["woken_by"])
        check_waits(run.summary(), 1, 0, 0)
        dumps = dumps_in(out)
        check(len(dumps) == 1 and dumps[0].endswith("-off-cpu.perfetto-trace"),
              "want one off-cpu dump, got %r" % dumps)


@test
def sleep_held_in_a_syscall_still_running_at_the_end_is_reported():
    need_root()
    with tempfile.TemporaryDirectory() as tmp, Control(start=True, stop=True) as control:
        log = os.path.join(tmp, "log")
        env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
        # One byte after 30 ms, the second only once the test says stop: the receive
        # slept past both thresholds and is still running when hybtrace stops.
        target = subprocess.Popen([workload("syscall_waits"), "sock", "30", "-1"], env=env)
        ht = Attached(["--pid", str(target.pid), "--json", "--off-cpu", "10ms", "--syscall",
                       "10ms"] + QUIET + ["--output", tmp])
        try:
            ht.wait_attached()
            control.start()
            # The first sleep ended with the first byte, and the receive sleeps again.
            wait_for(lambda: [e for e in read_log(log) if e["event"] == "asleep_again"], 30,
                     "the reader to take the first byte")
            rc = ht.stop()
        finally:
            control.stop()
            target.wait(30)
            ht.close()
        check(rc == 0, ht.describe())
        events = read_log(log)
    start = [e for e in events if e["event"] == "wait_start"][0]
    write = [e for e in events if e["event"] == "write"][0]
    # Before its start the reader slept in read, waiting for the start file: that wait too.
    mine = [b for b in ht.breaches() if b["tid"] == start["tid"] and
            b["start_ns"] > start["ts_ns"]]
    check(len(mine) == 1 and mine[0]["kinds"] == ["off-cpu"] and
          mine[0]["syscall"] == "recvfrom" and mine[0]["comm"] == "reader",
          "want the held off-cpu breach, got:\n" + ht.describe())
    b = mine[0]
    check(start["ts_ns"] < b["start_ns"] < write["ts_ns"] < b["end_ns"] and
          b["duration_ns"] >= 30_000_000 - tolerance_ns(30_000_000),
          "breach %d..%d, write %d" % (b["start_ns"], b["end_ns"], write["ts_ns"]))
    s, kinds = ht.summary(), [b["kinds"] for b in ht.breaches()]
    check_waits(s, kinds.count(["off-cpu"]), kinds.count(["syscall"]),
                kinds.count(["off-cpu", "syscall"]))
    check(kinds.count(["off-cpu"]) == 1, "kinds of the breaches: %r" % kinds)
    check(s["detected"] == s["reported"], "detected %r reported %r" % (s["detected"],
                                                                       s["reported"]))

