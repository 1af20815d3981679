# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The sampling source, for real: user-space slices in the dumps, fp and DWARF, perl, containers."""
import collections
import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time

from harness import (HYBTRACE, Attached, Control, check, cpu_seconds_of, hybtrace, need_root,
                     read_log, test, tp_query, trace_processor, wait_for, workload)
from perfetto_checks import ancestors, check_dump, check_sample_depths


def report(path):
    p = subprocess.run([HYBTRACE, "report", "--json", "--all", path], capture_output=True,
                       text=True, timeout=120)
    check(p.returncode == 0, "report failed: %s" % p.stderr)
    return json.loads(p.stdout)


def user_slices(rep, thread_tid):
    """User-space slices of one thread: (name, start_ns, end_ns), relative to the breach."""
    out = []
    for line in rep["timeline"]:
        if not line["thread"].endswith("[%d]" % thread_tid) or "samples)" not in line["what"]:
            continue
        out.append((line["name"], line["t_ns"], line["t_ns"] + line["dur_ns"]))
    return out


def span(slices, name, lo, hi):
    """From the first to the last slice called NAME within [lo, hi]: a preemption splits one."""
    found = [s for s in slices if s[0] == name and s[1] >= lo and s[2] <= hi]
    check(found, "no %s slice in [%.2f, %.2f] ms among %r"
          % (name, lo / 1e6, hi / 1e6, sorted({s[0] for s in slices})))
    return (name, min(s[1] for s in found), max(s[2] for s in found))


def close_enough(got_ns, want_ns, off_cpu_ns=0):
    """Within 20% (2 ms at least), plus the time the thread did not run then: samples are
    of its CPU time, so a phase it was preempted or queued at the edge of looks shorter."""
    return abs(got_ns - want_ns) <= max(want_ns * 0.2, 2_000_000) + off_cpu_ns


def off_cpu_within(rep, thread_tid, lo, hi):
    """How long the thread was queued or off-CPU within [lo, hi], as the dump's kernel side
    saw it (relative to the breach, as the timeline)."""
    total = 0
    for line in rep["timeline"]:
        if not line["thread"].endswith("[%d]" % thread_tid) or \
                line["name"] not in ("runqueue", "off-cpu"):
            continue
        total += max(0, min(hi, line["t_ns"] + line["dur_ns"]) - max(lo, line["t_ns"]))
    return total


def call_structure(binary, extra, mode=(), env=None):
    with tempfile.TemporaryDirectory() as out:
        # Only the sleep dumps: a write of the workload's log can take 10 ms on a loaded
        # machine, and its dump, taken before work_a ran, would be the one read.
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--syscall", "10ms",
                        "--syscalls", "clock_nanosleep", "--min-interval", "0ms",
                        "--sample-freq", "10000", "--pre", "250ms", "--output", out] + extra +
                       ["--", workload(binary), "30", "15", "1"] + list(mode), timeout=120,
                       env=env)
        check(run.rc == 0, run.describe())
        tid = run.events("a_start")[0]["tid"]
        dumps = [report(p) for p in glob.glob(os.path.join(out, "*-syscall.perfetto-trace"))]
        dumps = [r for r in dumps if r.get("tid") == tid]
        check(dumps, "no syscall dump of tid %d\n%s" % (tid, run.describe()))
        rep = dumps[0]
        base = rep["start_ns"]
        slices = user_slices(rep, tid)
        log = {e["event"]: e["ts_ns"] - base for e in run.log}
        margin = 5_000_000
        a = span(slices, "work_a", log["a_start"] - margin, log["a_end"] + margin)
        b = span(slices, "work_b", log["b_start"] - margin, log["b_end"] + margin)
        c = span(slices, "work_c", log["c_start"] - margin, log["c_end"] + margin)
        for name, got, start, end in [("work_a", a, "a_start", "a_end"),
                                      ("work_b", b, "b_start", "b_end"),
                                      ("work_c", c, "c_start", "c_end")]:
            want = log[end] - log[start]
            away = off_cpu_within(rep, tid, log[start] - margin, log[end] + margin)
            check(close_enough(got[2] - got[1], want, away),
                  "%s lasted %.2f ms, the workload says %.2f ms (%.2f ms off-CPU about then)"
                  % (name, (got[2] - got[1]) / 1e6, want / 1e6, away / 1e6))
            check(abs(got[1] - log[start]) <= max(want * 0.2, 2_000_000) + away,
                  "%s starts at %.2f ms, the workload says %.2f ms (%.2f ms off-CPU about then)"
                  % (name, got[1] / 1e6, log[start] / 1e6, away / 1e6))
        # Nesting: b inside a; c after a, not inside it.
        check(a[1] <= b[1] and b[2] <= a[2], "work_b %r is not inside work_a %r" % (b, a))
        check(c[1] >= a[2] - 1_000_000, "work_c %r overlaps work_a %r" % (c, a))
        check(rep["user_stack_before"], "no user stack before the breach")
        return rep


@test
def frame_pointer_stacks_show_the_call_structure():
    need_root()
    call_structure("callstack", ["--callgraph", "fp"])


@test
def stacks_of_a_program_that_exits_before_any_dump_is_built_are_symbolized():
    """run's child is hybtrace's fork until its exec: its maps must be read again as it
    execs. The builder here neither builds nor re-reads maps when idle until the workload
    (about 60 ms) is long gone, so only the read at its exec knows the program's files."""
    need_root()
    call_structure("callstack", ["--callgraph", "fp"],
                   env={"HYBTRACE_TEST_BUILDER_LATE_MS": "2000"})


@test
def dwarf_stacks_show_the_call_structure_without_frame_pointers():
    need_root()
    call_structure("callstack_nofp", ["--callgraph", "dwarf"])


def in_order(names, nested):
    """Whether NAMES come in NESTED's order, each name of NESTED taken once."""
    at = 0
    for name in names:
        if name not in nested[at:]:
            return False
        at = nested.index(name, at) + 1
    return True


@test
def sampled_flame_nests_as_the_program_calls_in_perfetto():
    """A sampled dump as Perfetto's own importer nests it: the workload's calls (main ->
    run_rounds -> work_a -> work_b, run_rounds -> work_c) with each caller above its callee,
    though a sample's frames begin together; the sampled stacks the dump carries are the
    slices open at their time, outermost at depth 0; and report lists a stack the same way."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--syscall", "10ms",
                        "--min-interval", "0ms", "--sample-freq", "10000", "--pre", "250ms",
                        "--output", out, "--callgraph", "fp", "--",
                        workload("callstack"), "30", "15", "1"], timeout=120)
        check(run.rc == 0, run.describe())
        tid = run.events("a_start")[0]["tid"]
        paths = glob.glob(os.path.join(out, "*-syscall.perfetto-trace"))
        check(paths, "no syscall dump\n" + run.describe())
        callers = {"work_b": "work_a", "work_a": "run_rounds", "work_c": "run_rounds",
                   "run_rounds": "main"}
        seen = set()
        together = 0
        for path in paths:
            check_dump(path)
            check(check_sample_depths(path) > 0, "%s carries no sampled stack" % path)
            parents = {r["parent_id"] for r in tp_query(
                path, "select distinct parent_id from slice where parent_id is not null")}
            for sid, name, depth, up in ancestors(path, list(callers)):
                ours = [a for a in up if a in callers or a == "main"]
                nested = bool(ours) and ours[0] == callers[name]
                # A frame sampled in its prologue or epilogue, where the frame pointer is
                # still its caller's, is unwound without that caller: only ever as the
                # innermost frame of its samples, a slice with no child, under its
                # caller's caller (main's is libc's, none of ours: run_rounds sampled so
                # sat right under __libc_start_call_main).
                if sid not in parents and not nested:
                    grand = callers.get(callers[name])
                    nested = ours[0] == grand if ours else grand is None
                check(nested, "%s: %s at depth %d under %r, its caller is %s"
                      % (path, name, depth, up, callers[name]))
                seen.add(name)
            # report's timeline: slices that begin together, outermost first. By the
            # order of each time's slices, not by name: a function may sit twice in one
            # stack (the kernel's kfree -> __put_partials -> ... -> kfree).
            rep = report(path)
            nested = collections.defaultdict(list)
            for r in tp_query(path, "select s.ts, s.name, s.depth from slice s join thread_track "
                              "tt on tt.id = s.track_id join thread t using (utid) where "
                              "t.tid = %d and s.category = 'user' and s.dur > 0 order by "
                              "s.ts, s.depth" % tid):
                nested[r["ts"]].append(r["name"])
            listed = collections.defaultdict(list)
            for l in rep["timeline"]:
                if l["thread"].endswith("[%d]" % tid) and "samples)" in l["what"]:
                    listed[l["t_ns"] + rep.get("start_ns", 0)].append(l["name"])
            for ts, names in listed.items():
                names = [n for n in names if n in nested.get(ts, ())]
                if len(names) < 2:
                    continue
                together += 1
                check(in_order(names, nested[ts]), "report lists %r at %d, Perfetto nests %r "
                      "from depth 0 down" % (names, ts, nested[ts]))
        check({"work_a", "work_b", "work_c"} <= seen, "slices seen: %r" % seen)
        check(together > 0, "no two slices of report's timeline begin together")


@test
def a_thread_born_after_attach_is_sampled():
    need_root()
    rep = call_structure("callstack", ["--callgraph", "fp"], mode=["thread"])
    check(rep["tid"] != rep["pid"], "the rounds should run in a thread of their own")


def manual_dump_of_a_busy_target(ht, busy, out):
    """Once hybtrace has attached and each process of BUSY, {pid: seconds} (None: the target
    hybtrace started), has run that much CPU time, so that it is deep in its loop however
    loaded the machine, SIGUSR2 and wait for the manual dump; returns its report."""
    attached = ht.wait_attached()
    busy = {attached["pid"] if p is None else p: s for p, s in busy.items()}
    wait_for(lambda: ht.proc.poll() is not None or
             all(cpu_seconds_of(p) >= s for p, s in busy.items()), 60,
             "%r to run that many seconds of CPU" % busy)
    check(ht.proc.poll() is None, "hybtrace exited before the dump:\n" + ht.describe())
    ht.proc.send_signal(signal.SIGUSR2)
    wait_for(lambda: glob.glob(os.path.join(out, "*-manual.perfetto-trace")), 30,
             "the manual dump")
    return report(glob.glob(os.path.join(out, "*-manual.perfetto-trace"))[0])


@test
def perl_dynsym_names_with_dwarf():
    need_root()
    perl = shutil.which("perl")
    check(perl, "perl is missing (Debian's perl-base is essential)")
    with tempfile.TemporaryDirectory() as out, Control(stop=True) as control:
        # The loop runs until the test has its dump: a fixed count ends in under a second
        # on a fast machine, before a dump asked for at a fixed time.
        loop = ("my $x = 0; until (-e $ENV{HT_STOP_FILE}) "
                "{ for my $i (1 .. 100000) { $x += $i * 2 } } print $x")
        ht = Attached(["run", "--json", "--quiet", "--rq-delay", "off", "--callgraph", "dwarf",
                       "--sample-freq", "10000", "--pre", "100ms", "--output", out,
                       "--", perl, "-e", loop], env=control.env)
        try:
            rep = manual_dump_of_a_busy_target(ht, {None: 0.3}, out)
            control.stop()
            check(ht.wait(30) == 0, ht.describe())
        finally:
            ht.close()
        names = {l["name"] for l in rep["timeline"] if "samples)" in l["what"]}
        pp = [n for n in names if n.startswith("Perl_pp_")]
        check(len(pp) >= 2, "want Perl_pp_* slices, got %r" % sorted(names)[:40])


@test
def target_in_its_own_namespaces_resolves():
    need_root()
    unshare = shutil.which("unshare")
    check(unshare, "unshare (util-linux) is missing")
    with tempfile.TemporaryDirectory() as tmp, Control(start=True) as control:
        log = os.path.join(tmp, "log")
        # Inside: a private tmpfs over /mnt holds the binary, invisible from outside.
        script = ("mount -t tmpfs none /mnt && cp %s /mnt/ns_callstack && "
                  "exec /mnt/ns_callstack 30 15 1" % workload("callstack"))
        env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
        ns = subprocess.Popen([unshare, "--pid", "--mount", "--fork", "--mount-proc", "sh", "-c",
                               script], env=env)
        ht = None
        try:
            inner = None
            deadline = time.time() + 10
            while time.time() < deadline and inner is None:
                for pid in os.listdir("/proc"):
                    if pid.isdigit():
                        try:
                            if os.readlink("/proc/%s/exe" % pid).endswith("/mnt/ns_callstack"):
                                inner = int(pid)
                        except OSError:
                            pass
                time.sleep(0.05)
            check(inner, "the namespaced workload did not start")
            check(not os.path.exists("/mnt/ns_callstack"), "the binary leaked out of the namespace")
            out = os.path.join(tmp, "out")
            os.mkdir(out)
            # Only the sleep dumps, not a slow write of the workload's log (as above).
            ht = Attached(["--pid", str(inner), "--json", "--quiet", "--rq-delay", "off",
                           "--syscall", "10ms", "--syscalls", "clock_nanosleep",
                           "--sample-freq", "10000", "--pre", "100ms", "--output", out])
            # The workload waits for the start file: its rounds begin once hybtrace watches.
            ht.wait_attached()
            control.start()
            check(ht.wait(60) == 0, ht.describe())
        finally:
            ns.kill()
            ns.wait()
            if ht:
                ht.close()
        dumps = glob.glob(os.path.join(out, "*-syscall.perfetto-trace"))
        check(dumps, "no dump: %s" % ht.stderr())
        rep = report(dumps[0])
        names = {l["name"] for l in rep["timeline"] if "samples)" in l["what"]}
        check({"work_a", "work_b", "work_c"} <= names, "unresolved stacks: %r" % sorted(names)[:30])


def build_id(binary):
    p = subprocess.run(["readelf", "-n", binary], capture_output=True, text=True)
    ids = [l.split(":", 1)[1].strip() for l in p.stdout.splitlines() if "Build ID:" in l]
    check(p.returncode == 0 and ids, "no build-id in %s: %s" % (binary, p.stderr))
    return ids[0]


class FifoWatch:
    """Whether anything opens the FIFO at PATH for reading: a writer that does not wait sees a
    reader (ENXIO means none), and its open releases a reader blocked in open()."""

    def __init__(self, path):
        self.path = path
        self.opened = False
        self.done = threading.Event()
        self.thread = threading.Thread(target=self.watch, daemon=True)
        self.thread.start()

    def watch(self):
        while not self.done.is_set():
            try:
                os.close(os.open(self.path, os.O_WRONLY | os.O_NONBLOCK))
                self.opened = True
            except OSError:
                pass
            self.done.wait(0.002)

    def stop(self):
        self.done.set()
        self.thread.join()
        return self.opened


@test
def dwarf_debug_file_symlink_stays_in_the_targets_root():
    need_root()
    unshare = shutil.which("unshare")
    check(unshare, "unshare (util-linux) is missing")
    # No CFI of its own: unwinding its code asks for its debug file by build-id.
    binary = workload("callstack_nocfi")
    bid = build_id(binary)
    debug_dir = "/usr/lib/debug/.build-id/" + bid[:2]
    with tempfile.TemporaryDirectory() as tmp:
        outside = os.path.join(tmp, "outside")
        layer = os.path.join(tmp, "layer")
        out = os.path.join(tmp, "out")
        for d in (outside, layer, out):
            os.mkdir(d)
        canary = os.path.join(outside, "canary.fifo")
        os.mkfifo(canary)
        # Inside its own mount namespace the target plants, in its /usr/lib/debug (an overlay
        # only it sees), an absolute symlink to the canary, then hides the canary from itself:
        # the path names it only in hybtrace's root.
        script = ("set -e; mount -t tmpfs none {layer}; mkdir {layer}/up {layer}/work; "
                  "mount -t overlay overlay -o lowerdir=/usr/lib,upperdir={layer}/up,"
                  "workdir={layer}/work /usr/lib; mkdir -p {dir}; ln -s {canary} {dir}/{file}; "
                  "mount -t tmpfs none {outside}; exec {binary} 30 15 1000").format(
                      layer=layer, dir=debug_dir, canary=canary, file=bid[2:] + ".debug",
                      outside=outside, binary=binary)
        log = os.path.join(tmp, "log")
        # Rounds enough to outlive the first dump: its stacks are unwound while the target lives.
        watch = FifoWatch(canary)
        ht = Attached(["run", "--json", "--quiet", "--rq-delay", "off", "--syscall", "10ms",
                       "--syscalls", "clock_nanosleep", "--sample-freq", "10000", "--pre",
                       "250ms", "--callgraph", "dwarf", "--output", out, "--",
                       unshare, "--mount", "sh", "-c", script], env={"HT_WORKLOAD_LOG": log})
        try:
            ht.wait_attached()
            # A hang here is the canary's open waiting for a writer.
            wait_for(lambda: ht.proc.poll() is not None or
                     any(o.get("type") == "dump" for o in ht.json_lines()), 60, "the first dump")
            breaches = ht.breaches()
            check(breaches, "no breach\n" + ht.describe())
            os.kill(breaches[0]["pid"], signal.SIGKILL)
            ht.wait(60)
        finally:
            opened = watch.stop()
            ht.close()
        check(not opened, "hybtrace opened the canary FIFO %s through the target's symlink\n%s"
              % (canary, ht.describe()))
        # `run` exits with its command's status: 128 + SIGKILL.
        check(ht.rc == 128 + signal.SIGKILL, ht.describe())
        check(read_log(log), "the workload did not run")
        check(glob.glob(os.path.join(out, "*-syscall.perfetto-trace")),
              "no dump, so no stack was unwound\n" + ht.describe())


@test
def only_the_targets_samples_are_recorded():
    need_root()
    # The events are CPU-wide; their filter must keep every other process out of the rings.
    with tempfile.TemporaryDirectory() as out, Control(stop=True) as control:
        env = dict(os.environ, HT_WORKLOAD_LOG=os.devnull, **control.env)
        hog = subprocess.Popen([workload("busy_threads"), "2", "4"], env=env)
        ht = Attached(["run", "--json", "--quiet", "--rq-delay", "off", "--sample-freq", "4999",
                       "--pre", "300ms", "--output", out, "--", workload("busy_threads"), "1",
                       "3"], env=env)
        try:
            # Both busy before the dump: the window holds the target's samples and the hog's
            # chances to leak in.
            rep = manual_dump_of_a_busy_target(ht, {None: 0.3, hog.pid: 0.1}, out)
            control.stop()
            check(ht.wait(30) == 0, ht.describe())
        finally:
            hog.kill()
            hog.wait()
            ht.close()
        meta = rep["metadata"]
        check(int(meta["samples_in_window"]) >= 100, "too few samples: %r" % meta)
        check(meta["samples_of_other_processes"] == "0",
              "other processes' samples were recorded: %r" % meta)
