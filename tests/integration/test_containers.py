# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Targets in a pid namespace of their own, as in a container (issue 17): hybtrace names
them by the pids its own namespace gives them and shows their own pids beside. The
workload runs under `unshare --pid --fork --mount-proc`, in a cgroup the test makes, and
logs getpid() and gettid() as it sees them inside; the kernel's /proc/PID/status (NSpid)
says which process outside it is. Watched by --cgroup and by --pid with the pid outside.
"""
import os
import re
import shutil
import subprocess
import tempfile

from harness import (Attached, Cgroup, Control, Skip, check, hybtrace_knows, need_root,
                     read_log, test, tolerance_ns, tp_query, trace_processor, wait_for,
                     workload)
# Until the dump builder draws each target process as its own track group, a breached
# thread's process in the dump is checked under --pid alone, where it is the first target.

ROUNDS = 8
SLEEP_MS = 30
OFF_CPU = "20ms"

# "1.234567 off-cpu 30.1ms tid 10 (sleeper) pid 9 (sleeper) [ns tid 3 pid 2] cpu 0: ..."
LIVE_LINE = re.compile(r"^\d+\.\d+ (?P<kinds>\S+) \S+ tid (?P<tid>\d+) \((?P<comm>[^)]*)\)"
                       r"(?: pid (?P<pid>\d+) \((?P<pcomm>[^)]*)\))?"
                       r"(?: \[ns (?:tid (?P<ns_tid>\d+) pid (?P<ns_pid>\d+)|pid (?P<ns_one>\d+))\])?"
                       r" cpu \d+")


def need_namespaces():
    need_root()
    for option in ("--children", "--cgroup"):
        if not hybtrace_knows(option):
            raise Skip("hybtrace has no %s (issue 17's targets)" % option)
    if not shutil.which("unshare"):
        raise Skip("unshare (util-linux) is missing")


def ns_pids(pid):
    """NSpid of /proc/PID/status: PID in each pid namespace from ours in; [] once gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("NSpid:"):
                    return [int(x) for x in line.split()[1:]]
    except OSError:
        pass
    return []


def exe_of(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return None


class Contained:
    """`sh -c 'WORKLOAD ARGS; true'` in new pid and mount namespaces (unshare --pid --fork
    --mount-proc), started inside cgroup CG: the shell is pid 1 there, the workload its
    child. --kill-child: whatever is left in the namespace dies with unshare."""

    def __init__(self, cg, env, name, args):
        self.cg = cg
        self.exe = os.path.realpath(workload(name))
        cmd = " ".join([self.exe] + [str(a) for a in args]) + "; true"
        self.proc = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc",
                                      "--kill-child", "sh", "-c", cmd],
                                     preexec_fn=cg.join, env=env)
        self.pid = self.shell = None

    def find(self, timeout_s=20):
        """The workload's pid outside (ours), and the shell's, once both are in the cgroup."""
        def found():
            check(self.proc.poll() is None, "unshare exited with %r" % self.proc.returncode)
            for pid in self.cg.procs():
                ns = ns_pids(pid)
                if len(ns) == 2 and ns[1] == 1:
                    self.shell = pid
                elif len(ns) == 2 and exe_of(pid) == self.exe:
                    self.pid = pid
            return self.pid and self.shell

        wait_for(found, timeout_s, "the workload in its pid namespace")
        return self.pid

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        # cgroup.kill (Linux 5.14): nothing of it outlives the test.
        try:
            with open(os.path.join(self.cg.path, "cgroup.kill"), "w") as f:
                f.write("1\n")
        except OSError:
            pass


def sleeps_of(log):
    """(ns pid, ns tid, [(start_ns, end_ns)]) of the sleeper thread, from its own log."""
    starts = [e for e in log if e["event"] == "sleep_start"]
    ends = [e for e in log if e["event"] == "sleep_end"]
    check(len(starts) == ROUNDS and len(ends) == ROUNDS,
          "the sleeper logged %d sleeps and %d ends, not %d" % (len(starts), len(ends), ROUNDS))
    return starts[0]["pid"], starts[0]["tid"], [(s["ts_ns"], e["ts_ns"])
                                                 for s, e in zip(starts, ends)]


def covers(b, lo, hi):
    tol = tolerance_ns(b["duration_ns"])
    return b["start_ns"] >= lo - tol and b["end_ns"] <= hi + tol


def parse_live_lines(stdout):
    """The text breach lines as dicts like the JSON ones: pid, tid, comm, ns_pid, ns_tid
    (absent where the line has none), line."""
    out = []
    for line in stdout.splitlines():
        m = LIVE_LINE.match(line)
        if not m:
            continue
        b = {"tid": int(m["tid"]), "comm": m["comm"], "line": line}
        b["pid"] = int(m["pid"]) if m["pid"] else b["tid"]
        if m["ns_tid"]:
            b["ns_tid"], b["ns_pid"] = int(m["ns_tid"]), int(m["ns_pid"])
        elif m["ns_one"]:
            b["ns_tid"] = b["ns_pid"] = int(m["ns_one"])
        out.append(b)
    return out


def check_dumps(out_dir, breaches, host_pid):
    """Each dump's breach, as Perfetto reads it, names the pids a breach line gave its
    thread, both sides of the namespace, and the thread's process in the dump is its own
    (host_pid)."""
    paths = sorted(os.path.join(out_dir, n) for n in os.listdir(out_dir)
                   if n.endswith(".perfetto-trace"))
    check(paths, "no dump written in %s" % out_dir)
    trace_processor()
    by_tid = {b["tid"]: b for b in breaches if "ns_tid" in b}
    seen_thread = False
    for path in paths:
        rows = tp_query(path, "select a.key, a.int_value from slice s join args a "
                        "using (arg_set_id) where s.name = 'breach' and s.dur > 0")
        args = {r["key"]: r["int_value"] for r in rows}
        tid = args.get("debug.tid")
        check(tid in by_tid, "%s: the breach of tid %r, not one the lines named in the "
              "namespace %r: %r" % (path, tid, sorted(by_tid), args))
        want = by_tid[tid]
        check(args.get("debug.ns_pid") == want["ns_pid"] and
              args.get("debug.ns_tid") == want["ns_tid"],
              "%s: the breach of tid %d says ns_pid %r ns_tid %r, its line %r" % (
                  path, tid, args.get("debug.ns_pid"), args.get("debug.ns_tid"), want))
        seen_thread |= want["ns_tid"] != want["ns_pid"]
        procs = tp_query(path, "select p.pid from thread t join process p using (upid) "
                         "where t.tid = %d" % tid)
        check([r["pid"] for r in procs] == [host_pid],
              "%s: thread %d belongs to process %r in the dump, not %d" % (
                  path, tid, procs, host_pid))
    return len(paths), seen_thread


def contained_sleeper(watch):
    """The sleeper in a pid namespace of its own, watched by WATCH ("cgroup" or "pid"):
    its thread's every 30 ms sleep is a breach of the right process outside, with the pids
    the thread logged inside beside; the JSON (--cgroup) or the live text line (--pid)
    says both, and so do the dumps."""
    need_namespaces()
    with Cgroup(prefix="hybtrace-ns") as cg, Control(start=True) as control, \
            tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "workload.log")
        out = os.path.join(tmp, "dumps")
        os.mkdir(out)
        env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
        # late: the sleeping thread is born 200 ms after the start, so it is no first
        # thread: its tid differs from its pid on both sides.
        box = Contained(cg, env, "sleeper", [SLEEP_MS, ROUNDS, "late"])
        ht = None
        try:
            host = box.find()
            json = watch == "cgroup"
            target = ["--cgroup", cg.path] if json else ["--pid", str(host)]
            # Every breach its own dump (they are 30 ms apart), each checked below.
            ht = Attached(target + (["--json", "--quiet"] if json else []) +
                          ["--off-cpu", OFF_CPU, "--rq-delay", "off", "--output", out,
                           "--min-interval", "1ms", "--max-dumps", "40", "--pre", "20ms"])
            ht.wait_attached(30)
            control.start()
            box.proc.wait(timeout=60)
            if json:
                # The cgroup stays: the session goes on until told to stop.
                ht.stop()
            check(ht.wait(60) == 0, "hybtrace:\n" + ht.describe())
            ht.close()
        finally:
            box.close()
            if ht:
                ht.close()
        ns_pid, ns_tid, sleeps = sleeps_of(read_log(log))
        check(ns_pid != host and ns_tid != ns_pid, "the sleeper logged pid %d tid %d inside, "
              "outside it is %d" % (ns_pid, ns_tid, host))
        breaches = ht.breaches() if json else parse_live_lines(ht.stdout())
        check(breaches, "no breach at all\n" + ht.describe())
        mine = [b for b in breaches if b["pid"] == host]
        # The thread: its tid outside is the one whose breaches cover its logged sleeps.
        thread = [b for b in mine if b["tid"] != host]
        tids = {b["tid"] for b in thread}
        check(len(tids) == 1, "breaches of sleeper threads %r, want its one thread; lines:\n%s"
              % (sorted(tids), "\n".join(str(b) for b in mine)))
        for b in mine:
            want = (ns_pid, ns_tid if b["tid"] in tids else ns_pid)
            check((b.get("ns_pid"), b.get("ns_tid")) == want,
                  "a breach of tid %d pid %d names ns pid %r tid %r; inside, the sleeper is "
                  "pid %d, its thread tid %d: %r" % (b["tid"], b["pid"], b.get("ns_pid"),
                                                      b.get("ns_tid"), ns_pid, ns_tid, b))
        if json:
            unseen = [s for s in sleeps if not any(covers(b, *s) for b in thread)]
            lost = (ht.summary() or {}).get("lost", {}).get("total", 0)
            check(len(unseen) <= lost, "%d of the thread's %d sleeps have no breach (lost %d)"
                  % (len(unseen), ROUNDS, lost))
        else:
            check(len(thread) >= ROUNDS - 1, "%d breaches of the thread for %d sleeps:\n%s"
                  % (len(thread), ROUNDS, ht.stdout()[-3000:]))
            # Its first thread's lines say one pid, the thread's both.
            check(any("[ns pid %d]" % ns_pid in b["line"] for b in mine if b["tid"] == host),
                  "no line of the first thread says [ns pid %d]:\n%s"
                  % (ns_pid, ht.stdout()[-3000:]))
        # Outside the namespace nothing is numbered twice: unshare (in the cgroup, in ours).
        for b in breaches:
            inside = ns_pids(b["pid"])
            if b["pid"] == box.shell and watch == "cgroup":
                check((b.get("ns_pid"), b.get("ns_tid")) == (1, 1),
                      "the namespace's first process, its shell, is pid 1 there: %r" % b)
            elif b["pid"] != host:
                check(watch == "cgroup" and b["pid"] == box.proc.pid and "ns_pid" not in b,
                      "a breach of pid %d (%s, pids %r) outside the target: %r"
                      % (b["pid"], b.get("comm"), inside, b))
        ndumps, thread_dumped = check_dumps(out, breaches, host)
        check(thread_dumped, "no dump is of the thread, whose two pids differ")
        print("    %s: sleeper pid %d (pid %d inside), thread tid %d inside; %d breaches, "
              "%d dumps" % (watch, host, ns_pid, ns_tid, len(mine), ndumps))


@test
def contained_process_watched_by_its_cgroup():
    contained_sleeper("cgroup")


@test
def contained_process_watched_by_its_pid_outside():
    contained_sleeper("pid")
