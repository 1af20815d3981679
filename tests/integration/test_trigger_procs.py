# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Code triggers in several processes: forks, execs, --pid A,B, and descriptors that run out."""
import glob
import json
import os
import re
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Cgroup, Control, Go, Skip, check, hybtrace,
                     hybtrace_knows, need_breakpoints, need_root, run_answering, test, wait_for,
                     whole_lines, workload)

TARGET = workload("trigger_target")
SLEEPER = workload("sleeper")


def reports_of(out):
    reports = []
    for d in sorted(glob.glob(os.path.join(out, "*-trigger.perfetto-trace"))):
        p = subprocess.run([HYBTRACE, "report", "--json", "--all", d], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, p.stderr)
        reports.append(json.loads(p.stdout))
    return reports


def run_triggered(args, mode):
    """`run` ARGS -- trigger_target MODE, answering its "ready" lines: (run, hits, reports)."""
    with tempfile.TemporaryDirectory() as out, Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        ht = Attached(["run", "--json", "--rq-delay", "off", "--output", out] + args +
                      ["--", TARGET] + mode, env=dict(HT_WORKLOAD_LOG=log, **control.env))
        run = run_answering(ht, Go(control, log), 60)
        check(run.rc == 0, run.describe())
        return run, [o for o in run.json_lines() if o.get("type") == "trigger"], reports_of(out)


def meta(report, key):
    """A dump's metadata value, a number where it is one."""
    v = report.get("metadata", {}).get(key)
    try:
        return int(v)
    except (TypeError, ValueError):
        return v


@test
def fires_in_a_child_forked_after_attach():
    """The child calls at once after its fork: it runs on the breakpoints it inherited, and
    the hit and its dump are the child's."""
    need_root()
    need_breakpoints()
    run, hits, reports = run_triggered(["--trigger", "send_order"], ["fork"])
    calls = run.events("call")
    parent = run.events("ready")[0]["pid"]
    check(len(calls) == 1 and calls[0]["pid"] != parent, "calls %r" % calls)
    check(len(hits) == 1, "%d hits for the child's call\n%s" % (len(hits), run.describe()))
    check(hits[0]["pid"] == calls[0]["pid"] and hits[0]["tid"] == calls[0]["tid"],
          "hit in pid %d tid %d, the child is %d" % (hits[0]["pid"], hits[0]["tid"],
                                                   calls[0]["pid"]))
    check(hits[0]["args"] == [1, 2, 3], "registers %r" % hits[0]["args"])
    check(len(reports) == 1, "%d dumps" % len(reports))
    r = reports[0]
    check(r["trigger"]["function"] == "send_order", "hit at %r" % r["trigger"])
    check(meta(r, "process_pid") == calls[0]["pid"] and
          meta(r, "target_pid") == calls[0]["pid"],
          "the dump names pid %r / %r, the child is %d" %
          (meta(r, "process_pid"), meta(r, "target_pid"), calls[0]["pid"]))


@test
def fires_in_a_child_that_execs_after_attach():
    """The child runs another image: what it inherited is gone, it is armed in its own."""
    need_root()
    need_breakpoints()
    run, hits, reports = run_triggered(["--trigger", "send_order", "--multi",
                                        "--min-interval", "0ms"], ["forkexec"])
    readies = run.events("ready")
    calls = run.events("call")
    check(len(readies) == 2 and readies[0]["pid"] != readies[1]["pid"], "readies %r" % readies)
    child = readies[1]["pid"]
    armed = [l for l in run.stderr.splitlines() if l.endswith("(pid %d) armed" % child)]
    check(armed, "not armed in the exec'd child %d:\n%s" % (child, run.describe()))
    check(len(calls) == 1 and len(hits) == 1 and hits[0]["pid"] == child and
          hits[0]["args"] == calls[0]["args"],
          "hits %r, calls %r\n%s" % (hits, calls, run.describe()))
    check(reports and meta(reports[0], "process_pid") == child,
          "the dump is of %r" % (reports and meta(reports[0], "process_pid")))


def pid_pair(control, log):
    """A sleeper (no trigger_target mapped) and trigger_target `calls 2`, started first."""
    sleeper = subprocess.Popen([SLEEPER, "100", "1000"], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    target = subprocess.Popen([TARGET, "calls", "2"],
                              env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
    wait_for(lambda: whole_lines(log), 10, "the target to start")
    return sleeper, target


@test
def fires_in_the_second_of_two_pids_not_in_one_without_the_module():
    need_root()
    need_breakpoints()
    with tempfile.TemporaryDirectory() as out, Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        sleeper, target = pid_pair(control, log)
        ht = Attached(["--pid", "%d,%d" % (sleeper.pid, target.pid), "--json", "--quiet",
                       "--rq-delay", "off", "--min-interval", "0ms", "--output", out,
                       "--multi", "--trigger", "trigger_target:send_order"])
        try:
            go = Go(control, log)
            wait_for(lambda: go.poll(ht.stderr()) or target.poll() is not None or
                     ht.proc.poll() is not None, 30, "the target to finish\n" + ht.describe())
            target.wait()
            sleeper.kill()
            sleeper.wait()
            ht.wait(60)
        finally:
            for p in (sleeper, target):
                if p.poll() is None:
                    p.kill()
                    p.wait()
            ht.close()
        stderr = ht.stderr()
        hits = [o for o in ht.json_lines() if o.get("type") == "trigger"]
        calls = [e for e in whole_lines(log) if e["event"] == "call"]
        check(any(l.endswith("(pid %d) armed" % target.pid) for l in stderr.splitlines()),
              "not armed in the second pid:\n" + ht.describe())
        check(not any("(pid %d)" % sleeper.pid in l for l in stderr.splitlines()),
              "armed in the sleeper, which does not map trigger_target:\n" + stderr)
        check([h["args"] for h in hits] == [c["args"] for c in calls] and
              all(h["pid"] == target.pid for h in hits),
              "hits %r for the calls %r\n%s" % (hits, calls, ht.describe()))
        summary = ht.summary()
        check(summary["triggers"]["never_resolved"] == [], "summary %r" % summary["triggers"])
        check(all(meta(r, "process_pid") == target.pid for r in reports_of(out)),
              "dumps of another process")


@test
def fires_in_a_process_moved_into_the_cgroup():
    """--cgroup with a trigger: of two trigger_target processes started outside the cgroup,
    the one moved in after attach is armed then and its calls hit; the other, never a
    member, is never armed."""
    need_root()
    need_breakpoints()
    if not hybtrace_knows("--cgroup"):
        raise Skip("hybtrace has no --cgroup")
    with tempfile.TemporaryDirectory() as out, Control(start=True) as control, Cgroup() as cg:
        log = os.path.join(control.dir, "workload.log")
        env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
        inside = subprocess.Popen([TARGET, "calls", "3"], env=env)
        outside = subprocess.Popen([TARGET, "calls", "3"], env=env)
        ht = None
        try:
            wait_for(lambda: len([e for e in whole_lines(log) if e["event"] == "ready"]) == 2,
                     10, "both targets to start")
            ht = Attached(["--cgroup", cg.name, "--json", "--quiet", "--rq-delay", "off",
                           "--min-interval", "0ms", "--output", out, "--multi",
                           "--trigger", "trigger_target:send_order"])
            ht.wait_attached()
            cg.move(inside.pid, cg.dir())
            wait_for(lambda: any(l.endswith("(pid %d) armed" % inside.pid)
                                 for l in ht.stderr().splitlines()), 10,
                     "hybtrace to arm the process moved in\n" + ht.describe())
            control.start()
            inside.wait(timeout=30)
            outside.wait(timeout=30)
            rc = ht.stop()
        finally:
            for p in (inside, outside):
                if p.poll() is None:
                    p.kill()
                    p.wait()
            if ht:
                ht.close()
        calls = [e for e in whole_lines(log) if e["event"] == "call"]
    check(rc == 0, "rc %d\n%s" % (rc, ht.describe()))
    check(not any("(pid %d)" % outside.pid in l for l in ht.stderr().splitlines()),
          "armed in the process never in the cgroup:\n" + ht.stderr())
    hits = [o for o in ht.json_lines() if o.get("type") == "trigger"]
    mine = [c["args"] for c in calls if c["pid"] == inside.pid]
    check(len(mine) == 3 and [h["args"] for h in hits] == mine and
          all(h["pid"] == inside.pid for h in hits),
          "hits %r for the moved process's calls %r (all calls %r)\n%s"
          % (hits, mine, calls, ht.describe()))


@test
def trigger_with_all_is_refused():
    need_root()
    run = hybtrace(["--all", "--trigger", "send_order", "--duration", "1s"])
    check(run.rc == 2, "exit %d, want 2\n%s" % (run.rc, run.describe()))
    lines = [l for l in run.stderr.splitlines() if l.strip()]
    check(len(lines) == 1 and "--trigger" in lines[0] and "--all" in lines[0],
          "want one line naming --trigger and --all:\n" + run.stderr)


LEFT_OUT = re.compile(r"^hybtrace: triggers: (\d+) threads? of pid (\d+) left without "
                      r"breakpoints: .*RLIMIT_NOFILE")


def fds_of_an_idle_session(threads):
    """Descriptors hybtrace holds once attached to a process of THREADS threads (and its
    main thread), with a trigger that resolves nowhere, less the trigger's rings and
    exec/mmap watches (one per CPU, and per thread and CPU): its own."""
    with Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        target = subprocess.Popen([TARGET, "threads", str(threads)],
                                  env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
        ht = None
        try:
            wait_for(lambda: whole_lines(log), 10, "the target to start")
            ht = Attached(["--pid", str(target.pid), "--json", "--quiet", "--rq-delay", "off",
                           "--trigger", "libnotthere.so.9:foo"])
            ht.wait_attached()
            ncpus = os.cpu_count()
            return len(os.listdir("/proc/%d/fd" % ht.pid)) - ncpus - (threads + 1) * ncpus
        finally:
            target.kill()
            target.wait()
            if ht:
                ht.close()


@test
def threads_left_out_under_a_small_descriptor_limit_are_said_and_counted():
    """prlimit leaves room for part of the target's threads only: a line says how many
    were left out, the summary and each dump count them, and the armed ones still fire."""
    need_root()
    need_breakpoints()
    threads = 48
    ncpus = os.cpu_count()
    base = fds_of_an_idle_session(threads)
    # Room for about half the threads' events (a side band and a breakpoint per CPU each).
    limit = base + 64 + (threads // 2) * 2 * ncpus
    with tempfile.TemporaryDirectory() as out, Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        target = subprocess.Popen([TARGET, "threads", str(threads)],
                                  env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
        try:
            wait_for(lambda: whole_lines(log), 10, "the target to start")
            ht = Attached(["--pid", str(target.pid), "--json", "--quiet", "--rq-delay", "off",
                           "--min-interval", "0ms", "--max-dumps", "2", "--output", out,
                           "--multi", "--trigger", "send_order"],
                          wrap=["prlimit", "--nofile=%d:%d" % (limit, limit)])
            # Threads are armed as far as descriptors go once the monitor has attached.
            ht.wait_attached()
            go = Go(control, log)
            wait_for(lambda: go.poll(ht.stderr()) or target.poll() is not None or
                     ht.proc.poll() is not None, 30, "the target to finish\n" + ht.describe())
            target.wait()
            ht.wait(60)
        finally:
            if target.poll() is None:
                target.kill()
                target.wait()
            ht.close()
        reports = reports_of(out)
    stderr = ht.stderr()
    said = [LEFT_OUT.match(l) for l in stderr.splitlines()]
    said = [m for m in said if m]
    check(len(said) == 1 and int(said[0].group(2)) == target.pid,
          "want one left-out line for pid %d (limit %d, %d descriptors idle):\n%s"
          % (target.pid, limit, base, ht.describe()))
    left = int(said[0].group(1))
    check(0 < left <= threads, "%d of %d threads left out" % (left, threads + 1))
    summary = ht.summary()
    check(summary and summary["triggers"]["left_out"] == left,
          "summary %r, the line said %d" % (summary and summary["triggers"], left))
    hits = [o for o in ht.json_lines() if o.get("type") == "trigger"]
    check(hits, "no hit from the threads that were armed\n" + ht.describe())
    check(reports and all(meta(r, "loss.trigger_threads_left_out") == left for r in reports),
          "dumps count %r left out, want %d\n%s" %
          ([meta(r, "loss.trigger_threads_left_out") for r in reports], left, ht.describe()))
