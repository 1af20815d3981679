# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""User marks of several target processes (issue 17, point 3), for real.

The workload (marks_procs tree) is one or two processes, each writing marks with names of
its own ("ROLE main" on its first thread, "ROLE worker" on a second one), then idling. A
manual dump taken then must hold every process's marks, each on its own thread's track
under its own process: `hybtrace report --json` says so, and so does Perfetto's own
importer (each mark's utid is the thread, and the thread's process the pid, that the
workload's log says wrote it).
"""
import glob
import json
import os
import signal
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Cgroup, Control, Skip, check, test, hybtrace_knows,
                     need_root, read_log, tp_query, trace_processor, wait_for, whole_lines,
                     workload)
from harness import NoTool

MARKS = workload("marks_procs")
COUNT = 20
ARGS = ["--json", "--rq-delay", "off", "--pre", "2s", "--post", "0ms"]


def need_processes(*options):
    need_root()
    for option in ("--children",) + options:
        if not hybtrace_knows(option):
            raise Skip("hybtrace has no %s (issue 17's targets)" % option)


def writers(log):
    """{mark name: (pid, tid)} from the workload's "marked" lines."""
    return {e["name"]: (e["pid"], e["tid"]) for e in log if e["event"] == "marked"}


def manual_dump(ht, out, log, want_names, describe):
    """Once every writer of WANT_NAMES logged its marks: a manual dump; its path."""
    wait_for(lambda: set(writers(whole_lines(log))) >= set(want_names), 30,
             "the workload's marks")
    ht.proc.send_signal(signal.SIGUSR2)
    wait_for(lambda: glob.glob(os.path.join(out, "*-manual.perfetto-trace")), 30,
             "the manual dump")
    paths = glob.glob(os.path.join(out, "*-manual.perfetto-trace"))
    check(len(paths) == 1, "manual dumps %r\n%s" % (paths, describe()))
    return paths[0]


def check_report(path, truth):
    """report --json and the text report: each name's COUNT marks on the writer's thread,
    with the writer's process; no process skipped."""
    p = subprocess.run([HYBTRACE, "report", "--json", "--all", path], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "report --json %s failed: %s" % (path, p.stderr))
    rep = json.loads(p.stdout)
    marks = [e for e in rep["timeline"] if e.get("category") == "user" and e["name"] in truth]
    for name, (pid, tid) in truth.items():
        mine = [e for e in marks if e["name"] == name]
        check(len(mine) == COUNT, "report of %s: %d marks %r, want %d (marks of %r)"
              % (path, len(mine), name, COUNT, sorted({e["name"] for e in marks})))
        for e in mine:
            check(e.get("pid") == pid and e["thread"].endswith("[%d]" % tid),
                  "report of %s: mark %r on thread %r of process %r, written by thread %d "
                  "of process %d" % (path, name, e["thread"], e.get("pid"), tid, pid))
    losses = rep["losses"]
    check(losses.get("loss.mark_processes") == 0 and losses.get("loss.marks") == 0,
          "report of %s: losses %r" % (path, losses))
    p = subprocess.run([HYBTRACE, "report", "--all", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "report %s failed: %s" % (path, p.stderr))
    # The text names each thread's process where the dump holds several.
    several = len({e["pid"] for e in rep["timeline"] if e.get("pid")}) > 1
    for e in marks:
        label = ("%s pid %d (%s)" % (e["thread"], e["pid"], e["process"]) if several
                 else e["thread"])
        check(any(label in line and e["name"] in line for line in p.stdout.splitlines()),
              "report of %s: no line of mark %r labelled %r" % (path, e["name"], label))


def check_perfetto(path, truth):
    """Perfetto's importer: each mark's thread (utid) and that thread's process."""
    rows = tp_query(path, "select s.name, t.tid, p.pid from slice s join thread_track tt on "
                    "s.track_id = tt.id join thread t using (utid) left join process p "
                    "using (upid) where s.name in (%s)"
                    % ",".join("'%s'" % n for n in truth))
    for name, (pid, tid) in truth.items():
        mine = [r for r in rows if r["name"] == name]
        check(len(mine) == COUNT, "%s: Perfetto sees %d marks %r on thread tracks, want %d"
              % (path, len(mine), name, COUNT))
        for r in mine:
            check(r["tid"] == tid and r["pid"] == pid, "%s: Perfetto puts mark %r on thread "
                  "%r of process %r; thread %d of process %d wrote it"
                  % (path, name, r["tid"], r["pid"], tid, pid))


def check_dump(path, truth):
    check_report(path, truth)
    try:
        trace_processor()
    except NoTool as e:
        raise Skip("report checked; %s" % e)
    check_perfetto(path, truth)


@test
def run_reads_marks_of_a_child_forked_after_attach():
    """run: alpha forks beta once hybtrace watches; both processes' marks, main thread and
    worker, land on their own threads under their own processes."""
    need_processes()
    with tempfile.TemporaryDirectory() as out, Control(stop=True) as control:
        log = os.path.join(control.dir, "workload.log")
        ht = Attached(["run", "--output", out] + ARGS +
                      ["--", MARKS, "tree", "alpha", str(COUNT), "beta"],
                      env=dict(HT_WORKLOAD_LOG=log, **control.env))
        try:
            names = ["alpha main", "alpha worker", "beta main", "beta worker"]
            path = manual_dump(ht, out, log, names, ht.describe)
            control.stop()
            rc = ht.wait(60)
        finally:
            control.stop()
            ht.close()
        check(rc == 0, "hybtrace run: rc %r\n%s" % (rc, ht.describe()))
        truth = writers(read_log(log))
        check(truth["alpha main"][0] != truth["beta main"][0], "beta was not a process of its "
              "own: %r" % truth)
        check_dump(path, truth)


def gamma_and_delta(out, control, watch, before_start=None, ends_with_them=True):
    """Two programs, gamma and delta, started apart, then hybtrace with WATCH(procs) (its
    target options) and OUT; BEFORE_START(procs) once it attached; a manual dump once both
    wrote their marks. hybtrace ends with its last target (ENDS_WITH_THEM), else on SIGINT.
    Returns (rc, hybtrace, the dump's path, the workload's log)."""
    log = os.path.join(control.dir, "workload.log")
    env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
    procs = [subprocess.Popen([MARKS, "tree", role, str(COUNT)], env=env)
             for role in ("gamma", "delta")]
    ht = None
    try:
        wait_for(lambda: len([e for e in whole_lines(log) if e["event"] == "ready"]) == 2,
                 10, "the two processes")
        ht = Attached(watch(procs) + ["--output", out] + ARGS)
        ht.wait_attached()
        if before_start:
            before_start(procs)
        control.start()
        names = ["gamma main", "gamma worker", "delta main", "delta worker"]
        path = manual_dump(ht, out, log, names, ht.describe)
        control.stop()
        for p in procs:
            p.wait(timeout=30)
        rc = ht.wait(60) if ends_with_them else ht.stop()
    finally:
        control.stop()
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        if ht:
            ht.close()
    return rc, ht, path, log


@test
def pids_reads_marks_of_each_process_named():
    """--pid A,B: two programs started apart, each its own marks, each read."""
    need_processes()
    with tempfile.TemporaryDirectory() as out, Control(start=True, stop=True) as control:
        rc, ht, path, log = gamma_and_delta(
            out, control, lambda procs: ["--pid", ",".join(str(p.pid) for p in procs)])
        check(rc == 0, "hybtrace --pid: rc %r\n%s" % (rc, ht.describe()))
        check_dump(path, writers(read_log(log)))


@test
def cgroup_reads_marks_of_a_process_moved_in():
    """--cgroup: of two programs started outside the cgroup, the one moved in after attach
    has its marks read, on its own threads; the other's, never a member, are not."""
    need_processes("--cgroup")
    with tempfile.TemporaryDirectory() as out, Control(start=True, stop=True) as control, \
            Cgroup() as cg:
        rc, ht, path, log = gamma_and_delta(
            out, control, lambda procs: ["--cgroup", cg.name],
            before_start=lambda procs: cg.move(procs[0].pid, cg.dir()), ends_with_them=False)
        check(rc == 0, "hybtrace --cgroup: rc %r\n%s" % (rc, ht.describe()))
        truth = writers(read_log(log))
        rep = json.loads(subprocess.run([HYBTRACE, "report", "--json", "--all", path],
                                        capture_output=True, text=True, timeout=120).stdout)
        strays = [e for e in rep["timeline"] if e.get("category") == "user" and
                  e["name"].startswith("delta")]
        check(not strays, "marks of the process never in the cgroup: %r" % strays[:2])
        check_dump(path, {k: v for k, v in truth.items() if k.startswith("gamma")})
