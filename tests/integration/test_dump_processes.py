# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Dumps of several target processes (issue 17), for real, read by Perfetto's own importer.

The workload (procs_spin) is three programs of one service on one CPU: alpha starts beta
and gamma (the same source built with other function names), and each burns the CPU in
ROLE_burn() -> ROLE_inner(). Their run-queue waits breach, and a window holds the three
processes' samples. Perfetto's trace processor must see each process as one process
(its pid, its comm) with its own threads (thread.upid), and each process's sampled frames
must be its own functions: a symbolizer of another process names them wrong or not at all.
The workload's log is the truth of which pid runs which program.
"""
import glob
import os
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Cgroup, Control, Skip, check, hybtrace,
                     hybtrace_knows, need_root, read_log, report_json, test, tp_query,
                     trace_processor, wait_for, workload)
from perfetto_checks import check_dump

ROLES = ("alpha", "beta", "gamma")
# Rounds of 20 ms of CPU then 10 ms of sleep, the three on CPU 0.
SPIN_ARGS = ["20", "10", "0"]


def need_processes(*options):
    need_root()
    trace_processor()
    for option in ("--children",) + options:
        if not hybtrace_knows(option):
            raise Skip("hybtrace has no %s (issue 17's targets)" % option)


def roles_of(log, describe):
    """{pid: role} from the workload's ready lines: the three programs, each its own pid."""
    roles = {e["pid"]: e["role"] for e in log if e["event"] == "ready"}
    check(sorted(roles.values()) == sorted(ROLES), "procs_spin's processes said %r\n%s"
          % (roles, describe))
    return roles


def names_of(role):
    """The comms a process of ROLE has had: alpha's before its prctl; the others', forked by
    alpha, before their exec, after it (the program's name cut to a comm), then their own.
    A dump names a process as it was called when the dump was built."""
    if role == "alpha":
        return ("procs_spin", "alpha_spin")
    return ("alpha_spin", ("procs_spin_" + role)[:15], role + "_spin")


def dump_files(out_dir):
    return sorted(glob.glob(os.path.join(out_dir, "hybtrace-*.perfetto-trace")))


def processes_seen(path, roles):
    """What Perfetto's importer makes of the dump at PATH, for the workload's processes:
    {pid: {"name", "upid", "tids": {tid: pid of its process}, "frames": {function names of
    its threads' sampled slices}}}, checking on the way that each process is one row, each
    thread under its own process, and each frame of its own program."""
    procs = tp_query(path, "select upid, pid, name from process where pid in (%s)"
                     % ",".join(str(p) for p in roles))
    seen = {}
    for p in procs:
        check(p["pid"] not in seen, "%s: pid %d is two processes in Perfetto: %r"
              % (path, p["pid"], procs))
        check(p["name"] in names_of(roles[p["pid"]]), "%s: process %d is named %r, not one "
              "of %r" % (path, p["pid"], p["name"], names_of(roles[p["pid"]])))
        seen[p["pid"]] = {"name": p["name"], "upid": p["upid"], "tids": {}, "frames": set()}
    check(len({p["upid"] for p in procs}) == len(procs), "%s: processes share a upid: %r"
          % (path, procs))
    threads = tp_query(path, "select t.tid, p.pid from thread t left join process p "
                       "using (upid) where t.tid in (%s)" % ",".join(str(p) for p in roles))
    for t in threads:
        # procs_spin's programs are single-threaded: each thread is its process.
        check(t["pid"] == t["tid"], "%s: thread %d is in process %s, not its own (%d)"
              % (path, t["tid"], t["pid"], t["tid"]))
        seen[t["tid"]]["tids"][t["tid"]] = t["pid"]
    frames = tp_query(path, "select s.name, t.tid, p.pid from slice s join thread_track tt "
                      "on s.track_id = tt.id join thread t using (utid) left join process p "
                      "using (upid) where s.name glob '*_burn' or s.name glob '*_inner'")
    for f in frames:
        check(f["pid"] in roles and f["tid"] == f["pid"],
              "%s: frame %s on thread %s of process %s, not one of procs_spin's %r"
              % (path, f["name"], f["tid"], f["pid"], roles))
        check(f["name"] in (roles[f["pid"]] + "_burn", roles[f["pid"]] + "_inner"),
              "%s: process %d runs %s's program, but its frame is named %s (another "
              "process's symbols)" % (path, f["pid"], roles[f["pid"]], f["name"]))
        seen[f["pid"]]["frames"].add(f["name"])
    return seen


def check_dumps(out_dir, roles, describe):
    """Every dump's processes as Perfetto sees them; returns {path: processes_seen}."""
    paths = dump_files(out_dir)
    check(paths, "no dump written\n" + describe)
    # Imported without errors, wakeup flows between processes' threads included.
    for path in paths:
        check_dump(path)
    seen = {path: processes_seen(path, roles) for path in paths}
    # A window holding several processes' events, each with its own frames named.
    several = [p for p, s in seen.items()
               if sum(1 for pid, v in s.items() if v["tids"] and
                      roles[pid] + "_burn" in v["frames"]) >= 2]
    check(several, "no dump has two or more processes, each with its own threads and its "
          "own burn function named: %r\n%s"
          % ({os.path.basename(p): {pid: sorted(v["frames"]) for pid, v in s.items()}
              for p, s in seen.items()}, describe))
    named = {pid for s in seen.values() for pid, v in s.items()
             if roles[pid] + "_burn" in v["frames"]}
    check(named == set(roles), "only processes %r had their burn function named in any "
          "dump, not all of %r\n%s" % (sorted(named), roles, describe))
    return seen


def check_report(path, roles, describe):
    """`hybtrace report` of a dump of several processes: the dump is of the breach's
    process, and each thread's timeline entry names its own process."""
    rep = report_json(path)
    check(rep.get("breach") and rep["tid"] in roles, "report of %s: no breach of procs_spin's "
          "%r: %r\n%s" % (path, roles, {k: rep.get(k) for k in ("kind", "tid", "pid")},
                          describe))
    check(rep["pid"] == rep["tid"], "report of %s: the dump is of pid %r, the breach of %d's "
          "thread %d" % (path, rep["pid"], rep["tid"], rep["tid"]))
    check(os.path.basename(path).startswith("hybtrace-%d-" % rep["tid"]),
          "%s is not named after the breach's process %d" % (path, rep["tid"]))
    entries = [e for e in rep["timeline"] if "pid" in e and e["pid"] in roles]
    check(len({e["pid"] for e in entries}) >= 2, "report of %s: timeline entries of %r, want "
          "two processes or more" % (path, sorted({e["pid"] for e in entries})))
    for e in entries:
        check(e["process"] in names_of(roles[e["pid"]]) and
              e["thread"].endswith("[%d]" % e["pid"]),
              "report of %s: entry %r names another process" % (path, e))
    p = subprocess.run([HYBTRACE, "report", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "report %s failed: %s" % (path, p.stderr))
    for label in {"%s pid %d (%s)" % (e["thread"], e["pid"], e["process"]) for e in entries}:
        check(label in p.stdout, "report of %s: no line labelled %r:\n%s"
              % (path, label, p.stdout[-3000:]))


DUMP_OPTIONS = ["--json", "--rq-delay", "2ms", "--source", "sample", "--pre", "60ms",
                "--dump-policy", "first", "--min-interval", "100ms", "--max-dumps", "4"]


@test
def run_dumps_each_process_of_a_tree_with_its_own_symbols():
    """run follows procs_spin's children (two other programs, after exec): a dump holds
    the three processes, each its own process group in Perfetto, each thread under its
    own process, each process's frames its own program's functions (frame-pointer and
    DWARF call stacks); report names each thread's process, and the dump is named after
    the breach's process."""
    need_processes()
    # Frame pointers, then DWARF: an unwinder per process too.
    for callgraph in ("fp", "dwarf"):
        with tempfile.TemporaryDirectory() as out:
            run = hybtrace(["run", "--callgraph", callgraph] + DUMP_OPTIONS +
                           ["--output", out, "--", workload("procs_spin"), "30"] + SPIN_ARGS,
                           timeout=120)
            describe = "--callgraph %s\n%s" % (callgraph, run.describe())
            check(run.rc == 0, "hybtrace or procs_spin failed\n" + describe)
            roles = roles_of(run.log, describe)
            check(run.events("done"), "procs_spin did not run to its end\n" + describe)
            seen = check_dumps(out, roles, describe)
            best = max(seen, key=lambda p: sum(1 for v in seen[p].values() if v["frames"]))
            check_report(best, roles, describe)


@test
def cgroup_alone_dumps_symbolized_stacks_of_each_process():
    """--cgroup alone (no process named): dumps are of the breach's process, not pid 0,
    and every process's sampled stacks are named by its own symbols."""
    need_processes("--cgroup")
    with Cgroup() as cg, Control(stop=True) as control, \
            tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log")
        ht = Attached(["--cgroup", cg.name] + DUMP_OPTIONS + ["--output", out])
        wl = None
        try:
            ht.wait_attached()
            wl = subprocess.Popen([workload("procs_spin"), "1000"] + SPIN_ARGS,
                                  env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env),
                                  preexec_fn=cg.join)
            # Until each process has been named in some dump, or the dumps run out.
            def enough():
                dumps = [o for o in ht.json_lines() if o.get("type") == "dump"]
                return wl.poll() is not None or len(dumps) >= 4
            wait_for(enough, 60, "four dumps")
            control.stop()
            wl.wait(timeout=30)
            cg.remove()
            rc = ht.wait(60)
        finally:
            control.stop()
            if wl and wl.poll() is None:
                wl.kill()
                wl.wait()
            ht.close()
        check(rc == 0, "hybtrace: rc %d once its cgroup was removed\n%s" % (rc, ht.describe()))
        roles = roles_of(read_log(log), ht.describe())
        seen = check_dumps(out, roles, ht.describe())
        for path in seen:
            check(not os.path.basename(path).startswith("hybtrace-0-"),
                  "%s: a breach's dump named after pid 0" % path)
        best = max(seen, key=lambda p: sum(1 for v in seen[p].values() if v["frames"]))
        check_report(best, roles, ht.describe())
