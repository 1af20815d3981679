# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A dump's native scheduling data (userspace/kernel/sched_ftrace.c) as Perfetto's own trace
processor reads it: the `sched` table on the window's CPUs, the breached thread's
`thread_state` over the breach (with the function it blocked in), the task that held its CPU,
new threads and processes in their processes, and no import error."""
import glob
import json
import os
import subprocess
import sys
import tempfile

from harness import (Attached, check, hybtrace, need_root, pb_fields, report_json, test,
                     tp_query, trace_packets, trace_processor, wait_for, workload)
from perfetto_checks import check_no_import_errors
import sched_rules

# TracePacket.ftrace_events; FtraceEventBundle.cpu.
PACKET_FTRACE_EVENTS = 1
BUNDLE_CPU = 1
# How far Perfetto's times of the breach may lie from hybtrace's: a waking's time is moved
# into its waker's time on its CPU, within the skew of the run-queue clock it came from.
SLACK_NS = 50_000


def bundle_cpus(path):
    """The CPUs the file has an FtraceEventBundle for."""
    cpus = set()
    for packet in trace_packets(path):
        for number, wire, bundle in packet:
            if number != PACKET_FTRACE_EVENTS or wire != 2:
                continue
            for field, _, value in pb_fields(bundle):
                if field == BUNDLE_CPU:
                    cpus.add(value)
    return cpus


def check_sched_table(path):
    """Slices in `sched` on every CPU the file has scheduling data for, and on no other (each
    CPU's has at least the slice of the task that ran when the window began)."""
    cpus = bundle_cpus(path)
    check(cpus, "%s has no FtraceEventBundle" % path)
    rows = tp_query(path, "select cpu, count(*) as n from sched group by cpu")
    check({r["cpu"] for r in rows} == cpus, "%s: sched has slices on CPUs %r, the file "
          "bundles for %r" % (path, rows, sorted(cpus)))


def thread_states(path, tid, start_ns, end_ns):
    """The thread_state rows of TID around [START_NS, END_NS], in time order."""
    return tp_query(path, "select ts.ts, ts.dur, ts.state, ts.cpu, (select tid from thread w "
                    "where w.utid = ts.waker_utid) as waker from thread_state ts "
                    "join thread using (utid) where thread.tid = %d and ts.ts < %d and "
                    "ts.ts + ts.dur > %d order by ts.ts" % (tid, end_ns + SLACK_NS,
                                                            start_ns - SLACK_NS))


def near(a, b):
    return abs(a - b) <= SLACK_NS


def check_report_reads_states_as_perfetto(path, r):
    """`hybtrace report --json` rebuilds the breached thread's thread states from the file's
    native scheduling data: every row trace processor's thread_state has for the thread, in
    order, with the same state, length, CPU, waker, interrupt context and blocked function,
    and the same times (relative to the first row: the report keeps the dump's MONOTONIC
    clock, Perfetto BOOTTIME)."""
    ours = (r.get("thread_states") or {}).get("states")
    check(ours, "%s: the report has no thread states of %d: %r"
          % (path, r["tid"], r.get("thread_states")))
    theirs = tp_query(path, "select ts.ts, ts.dur, ts.state, ts.cpu, ts.irq_context, "
                      "ts.blocked_function, (select tid from thread w where w.utid = "
                      "ts.waker_utid) as waker from thread_state ts join thread using (utid) "
                      "where thread.tid = %d order by ts.ts, ts.id" % r["tid"])
    check(len(ours) == len(theirs), "%s: the report has %d thread states of %d, Perfetto %d:"
          "\n  ours   %r\n  theirs %r" % (path, len(ours), r["tid"], len(theirs), ours[:12],
                                           theirs[:12]))
    for i, (a, b) in enumerate(zip(ours, theirs)):
        want = {"t": b["ts"] - theirs[0]["ts"], "dur": None if b["dur"] == -1 else b["dur"],
                "state": b["state"], "cpu": b["cpu"], "waker": b["waker"],
                "irq": None if b["irq_context"] is None else bool(b["irq_context"]),
                "blocked": b["blocked_function"]}
        got = {"t": a["t_ns"] - ours[0]["t_ns"], "dur": a["dur_ns"], "state": a["state"],
               "cpu": a["cpu"], "waker": a["waker_tid"], "irq": a.get("irq"),
               "blocked": a.get("blocked_function")}
        check(got == want, "%s: thread state %d of %d: the report says %r, Perfetto %r"
              % (path, i, r["tid"], got, want))


def dump_of_kind(out, kind, tid=None):
    """The first dump in OUT whose breach is of KIND (and of thread TID), and its report."""
    for path in sorted(glob.glob(os.path.join(out, "*.perfetto-trace"))):
        r = report_json(path)
        if r.get("kind") == kind and tid in (None, r.get("tid")):
            return path, r
    check(False, "no %s dump of %r in %s" % (kind, tid, out))
    return None, None


def futex_off_cpu_dump(out, rounds):
    """offcpu_wake's futex scenario (ROUNDS rounds) under hybtrace, off-CPU breaches at 10 ms:
    the run, and the first round's dump (its path and report)."""
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms",
                    "--min-interval", "0ms", "--output", out, "--",
                    workload("offcpu_wake"), "futex", "20", str(rounds)])
    check(run.rc == 0, run.describe())
    victim = run.events("block_start")[0]["tid"]
    path, r = dump_of_kind(out, "off-cpu", victim)
    return run, path, r


@test
def off_cpu_dump_has_native_thread_states():
    """An off-CPU breach: the thread sleeps (S) from the breach's start, in the futex function
    it blocked in, then is runnable (R) from its waking by the releaser, which is on its
    critical path, and runs again at the breach's end."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run, path, r = futex_off_cpu_dump(out, 1)
        check_no_import_errors(path)
        check_sched_table(path)
        rows = thread_states(path, r["tid"], r["start_ns"], r["end_ns"])
        sleeps = [x for x in rows if x["state"] == "S" and near(x["ts"], r["start_ns"])]
        check(sleeps, "%s: no S state of %d from the breach's start %d: %r"
              % (path, r["tid"], r["start_ns"], rows))
        # From the sleep on, the thread is S then R until it runs again at the breach's end.
        after = [x for x in rows if x["ts"] >= sleeps[0]["ts"]]
        waiting = after[:next((i for i, x in enumerate(after) if x["state"] == "Running"),
                              len(after))]
        check(waiting and near(waiting[-1]["ts"] + waiting[-1]["dur"], r["end_ns"]),
              "%s: %d's wait in thread_state %r does not end at the breach's end %d"
              % (path, r["tid"], waiting, r["end_ns"]))
        check(all(x["state"] in ("S", "R") for x in waiting),
              "%s: states in the wait %r" % (path, waiting))
        releaser = run.events("release")[0]["tid"]
        woken = [x for x in waiting if x["state"] == "R"]
        check(woken and woken[0]["waker"] == releaser,
              "%s: no R state of %d woken by the releaser %d: %r"
              % (path, r["tid"], releaser, waiting))
        on_path = critical_path_tids(path, r["tid"], r["start_ns"], r["end_ns"])
        check(releaser in on_path, "%s: the critical path of %d over its breach holds %r, "
              "not the releaser %d" % (path, r["tid"], sorted(on_path), releaser))
        check_blocked_function(path, r["tid"], r["start_ns"])
        check_report_reads_states_as_perfetto(path, r)


def critical_path_tids(path, tid, start_ns, end_ns):
    """The threads on Perfetto's critical path of TID over [START_NS, END_NS] (its stdlib's
    sched.thread_executing_span, as the UI's Critical Path shows it)."""
    return {row["tid"] for row in tp_query(
        path, "include perfetto module sched.thread_executing_span; "
        "select distinct (select tid from thread where thread.utid = cp.utid) as tid "
        "from _thread_executing_span_critical_path((select utid from thread where "
        "tid = %d), %d, %d) cp" % (tid, start_ns, end_ns - start_ns))}


def check_blocked_function(path, tid, start_ns):
    """The kernel has no sched_blocked_reason tracepoint: the dump derives it from the stack
    the breached thread slept on, so Perfetto's S state of a futex wait at the breach's start
    names a futex function as blocked_function, and not an I/O wait."""
    rows = tp_query(path, "select ts.ts, ts.state, ts.blocked_function as fn, ts.io_wait "
                    "from thread_state ts join thread using (utid) where thread.tid = %d "
                    "and ts.state = 'S' and ts.ts between %d and %d"
                    % (tid, start_ns - SLACK_NS, start_ns + SLACK_NS))
    check(rows and all((x["fn"] or "").startswith("futex_") and not x["io_wait"]
                       for x in rows),
          "%s: the S state of %d at the breach's start %d names no futex function: %r"
          % (path, tid, start_ns, rows))


# The target starts a thread and forks a process that starts a thread of its own; each new
# thread names itself, logs its tid and waits. Then the main thread sleeps 100 ms (the
# breach the test takes the dump of, whose window reaches back over the forks) and lets
# them all end.
FORKER = r'''
import json, os, threading, time
def log(event, **kw):
    with open(os.environ["HT_WORKLOAD_LOG"], "a") as f:
        f.write(json.dumps(dict(event=event, pid=os.getpid(), tid=threading.get_native_id(),
                                ts_ns=time.monotonic_ns(), **kw)) + "\n")
def named(name, ready, done):
    with open("/proc/thread-self/comm", "w") as f:
        f.write(name)
    log("started", name=name)
    ready.set()
    done.wait()
ready, done = threading.Event(), threading.Event()
t = threading.Thread(target=named, args=("ht_thread", ready, done))
t.start()
ready.wait()
r, w = os.pipe()
child = os.fork()
if child == 0:
    os.close(w)
    ready, done = threading.Event(), threading.Event()
    g = threading.Thread(target=named, args=("ht_grandthread", ready, done))
    g.start()
    ready.wait()
    log("started", name="child")
    os.read(r, 1)
    done.set()
    g.join()
    os._exit(0)
os.close(r)
log("sleep")
time.sleep(0.1)
time.sleep(0.5)
done.set()
t.join()
os.close(w)
os.waitpid(child, 0)
'''


@test
def new_tasks_land_in_their_processes():
    """Forks in the window are task_newtask events: Perfetto starts each new thread in its
    parent's process and each forked process as a process of its own, with the names they
    carry, one thread row per tid (no second one from the process tree)."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "80ms",
                        "--pre", "200ms", "--min-interval", "0ms", "--output", out, "--",
                        sys.executable, "-c", FORKER], timeout=60)
        check(run.rc == 0, run.describe())
        started = {e["name"]: e for e in run.events("started")}
        sleep = run.events("sleep")
        check(len(started) == 3 and sleep, "the forker logged %r" % run.log)
        main = sleep[0]["tid"]
        path = None
        for p in sorted(glob.glob(os.path.join(out, "*.perfetto-trace"))):
            r = report_json(p)
            if r.get("tid") == main and r.get("start_ns", 0) >= sleep[0]["ts_ns"]:
                path = p
                break
        check(path, "no dump of the sleep of %d after its forks in %s" % (main, out))
        check_no_import_errors(path)
        want = {started["ht_thread"]["tid"]: (main, "ht_thread"),
                started["child"]["pid"]: (started["child"]["pid"], None),
                started["ht_grandthread"]["tid"]: (started["child"]["pid"], "ht_grandthread")}
        rows = tp_query(path, "select t.tid, t.name, p.pid from thread t left join process p "
                        "using (upid) where t.tid in (%s)" % ",".join(map(str, want)))
        for tid, (pid, name) in want.items():
            mine = [x for x in rows if x["tid"] == tid]
            check(len(mine) == 1 and mine[0]["pid"] == pid and
                  (name is None or mine[0]["name"] == name),
                  "%s: thread %d should be one row in process %d named %r: %r"
                  % (path, tid, pid, name, rows))


@test
def run_queue_dump_has_the_hog_on_its_cpu():
    """The demo's run-queue breach: the worker is runnable (R or R+) over the breach, and
    the batch job that held its CPU is in `sched` on that CPU then. Where the kernel did not
    trace the wakeup that began the wait (this guest's, now and then beside stress-ng), the
    breach names no waker and the dump holds no waking (none is made up: Perfetto would name
    whatever ran on the CPU as its waker): the worker stays asleep in Perfetto's states until
    its switch-in, and the report says no waker either."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "1ms", "--max-dumps", "1", "--output",
                        out, "--no-children", "--", workload("demo_service"), "2"], timeout=120)
        check(run.rc == 0, run.describe())
        path, r = dump_of_kind(out, "rq-delay")
        check_no_import_errors(path)
        check_sched_table(path)
        rows = thread_states(path, r["tid"], r["start_ns"], r["end_ns"])
        # The wait: its runnable rows from the breach's start until the worker runs again
        # (the rows, read a slack wide, may hold the next wait too: preempted again right
        # after its switch-in, 44 us later in a loop run).
        first = next((i for i, x in enumerate(rows)
                      if x["state"] in ("R", "R+") and near(x["ts"], r["start_ns"])), len(rows))
        after = rows[first:]
        runnable = after[:next((i for i, x in enumerate(after)
                                if x["state"] not in ("R", "R+")), len(after))]
        live = [b for b in run.breaches("rq-delay") if (b["tid"], b["start_ns"], b["end_ns"])
                == (r["tid"], r["start_ns"], r["end_ns"])]
        check(len(live) == 1, "%s: the live breach of the dump: %r" % (path, live))
        if live[0]["woken_by"] is None and not runnable:
            counted = (run.summary() or {}).get("judged", {}).get("untraced_wakeup", 0)
            check(r.get("woken_by") is None and counted > 0,
                  "%s: a wait whose wakeup went untraced: the report's waker %r, %d counted"
                  % (path, r.get("woken_by"), counted))
        else:
            check(runnable and near(runnable[0]["ts"], r["start_ns"]) and
                  near(runnable[-1]["ts"] + runnable[-1]["dur"], r["end_ns"]),
                  "%s: %d runnable in thread_state %r, the breach is %d..%d"
                  % (path, r["tid"], rows, r["start_ns"], r["end_ns"]))
        hogs = [c for c in r["ran_instead"] if c["cpu"] is not None]
        check(hogs, "%s: the report names no task that ran instead: %r" % (path, r))
        hog = hogs[0]
        ran = tp_query(path, "select count(*) as n from sched join thread using (utid) "
                       "where thread.tid = %d and sched.cpu = %d and sched.ts < %d and "
                       "sched.ts + sched.dur > %d" % (hog["pid"], hog["cpu"], r["end_ns"],
                                                      r["start_ns"]))
        check(ran[0]["n"] > 0, "%s: %s[%d] is not in sched on CPU %d during the breach"
              % (path, hog["comm"], hog["pid"], hog["cpu"]))
        check_report_reads_states_as_perfetto(path, r)


def recorded_wakes(path, breaches):
    """The monitor's own record of the wakeups that ended BREACHES (the run's live breach
    lines, not the dump), of those inside PATH's window: (MONOTONIC ts, wakee tid, waker tid
    or None, source, when its sleep began or None)."""
    window = report_json(path)["window"]
    out = []
    for b in breaches:
        w = b.get("woken_by")
        if w and window["start_ns"] <= w["at_ns"] <= window["end_ns"]:
            out.append((w["at_ns"], b["tid"], w.get("tid"), w["source"], sleep_start(b)))
    return out


def inferred_wakings(path):
    """Each waking of the file's bundles as Perfetto's importer sees it: (BOOTTIME ts,
    wakee, common_flags, cpu, the waker it infers: the task running on the bundle's CPU then,
    None before the CPU's first switch)."""
    with open(path, "rb") as f:
        ns = sched_rules.NativeSched(f.read())
    out = []
    for b in ns.bundles:
        sw_ts, pids = b.switch_ts(), b.get("switch_next_pid")
        flags = b.get("waking_common_flags")
        for i, (t, wakee) in enumerate(zip(b.waking_ts(), b.get("waking_pid"))):
            k = sched_rules.running_at(sw_ts, t)
            out.append((t, wakee, flags[i] if i < len(flags) else 0, b.cpu,
                        pids[k] if k >= 0 else None))
    return out, ns.boottime_offset()


# Where a bundle's waking may lie from the wakeup hybtrace recorded (at its enqueue): at the
# waker's sched_waking, up to the delay a record can carry before it (HT_FR_WAKE_DELAY_MAX_US,
# include/hybtrace/records.h; hundreds of microseconds for a wakeup of a task on an idle CPU of
# this guest, queued there after the IPI), or moved into its waker's time on the CPU, a
# little after it.
MAX_DELAY_NS = 0xffff * 1000
MATCH_NS = 200_000


def waking_of(wakings, wakee, boot_ts, not_before=None):
    """The waking of WAKEE that queued it at BOOT_TS: its last one from MAX_DELAY_NS before
    to MATCH_NS after, and not before NOT_BEFORE (the sleep's start, BOOTTIME) where known;
    None without one."""
    lo = max(boot_ts - MAX_DELAY_NS, not_before or 0)
    ones = [w for w in wakings if w[1] == wakee and lo <= w[0] <= boot_ts + MATCH_NS]
    return max(ones, key=lambda w: w[0]) if ones else None


def sleep_start(breach):
    """When the off-CPU wait of BREACH began (MONOTONIC), or None for other kinds."""
    return (breach.get("off_cpu") or {}).get("start_ns")


# The irq bits a waking's common_flags has for each source of a wakeup hybtrace names.
SOURCE_FLAGS = {"task": 0, "none": 0, "irq": 0x08, "timer": 0x08, "softirq": 0x10}


def waker_never_seen_running(path, waker, lo, hi):
    """True when no bundle of PATH shows task WAKER running between LO and HI (BOOTTIME): the
    writer leaves its waking out then (its switch-in went untraced, or came before the window),
    rather than give it to whatever ran on its CPU (collect_wakings() in
    kernel/sched_ftrace.c)."""
    with open(path, "rb") as f:
        ns = sched_rules.NativeSched(f.read())
    for b in ns.bundles:
        sw_ts, pids = b.switch_ts(), b.get("switch_next_pid")
        for k, (t, pid) in enumerate(zip(sw_ts, pids)):
            if pid == waker and t <= hi and (k + 1 >= len(sw_ts) or sw_ts[k + 1] >= lo):
                return False
    return True


def check_wakers(path, breaches):
    """Each wakeup the monitor recorded as ending one of BREACHES inside PATH's window has a
    waking near it in the bundles, with interrupt context as its source says; one by a task
    has, as Perfetto infers it, that task for its waker. Returns how many wakers were
    compared."""
    wakings, offset = inferred_wakings(path)
    compared = 0
    for ts, wakee, waker, source, slept in recorded_wakes(path, breaches):
        boot_ts, not_before = ts + offset, slept and slept + offset
        w = waking_of(wakings, wakee, boot_ts, not_before)
        if (w is None and source == "task" and waker is not None and
                waker_never_seen_running(path, waker, max(boot_ts - MAX_DELAY_NS,
                                                          not_before or 0), boot_ts)):
            continue
        check(w is not None, "%s: hybtrace's wakeup of %d (%s) at %d has no waking in the "
              "bundles from %d ns before to %d ns after it, nor after its sleep began at %r "
              "(its wakings there, ns from it: %s)"
              % (path, wakee, source, ts, MAX_DELAY_NS, MATCH_NS, slept,
                 [x[0] - ts - offset for x in wakings if x[1] == wakee]))
        check(source not in SOURCE_FLAGS or w[2] & sched_rules.IRQ_FLAGS == SOURCE_FLAGS[source],
              "%s: hybtrace's wakeup of %d at %d is by %s; its waking at %d on CPU %d has flags "
              "%#x" % (path, wakee, ts, source, w[0], w[3], w[2]))
        if source != "task" or waker is None:
            continue
        check(w[4] == waker, "%s: hybtrace says %d woke %d at %d (MONOTONIC); Perfetto "
              "would take %r, running on CPU %d at the waking's %d (BOOTTIME, flags %#x)"
              % (path, waker, wakee, ts, w[4], w[3], w[0], w[2]))
        compared += 1
    return compared


def check_breach_waker(path, r):
    """The breach's `woken_by` in the report: a task's waking is inferred to that task, an
    interrupt's carries the irq or softirq flag."""
    woken = r.get("woken_by")
    if not woken:
        return
    wakings, offset = inferred_wakings(path)
    slept = sleep_start(r)
    w = waking_of(wakings, r["tid"], woken["at_ns"] + offset, slept and slept + offset)
    check(w is not None, "%s: the breach's waking of %d at %d (%r) is not in the bundles"
          % (path, r["tid"], woken["at_ns"], woken))
    if woken["source"] == "task":
        check(w[4] == woken.get("tid"), "%s: the report says %r woke %d; Perfetto would take "
              "%r (CPU %d, %d BOOTTIME)" % (path, woken, r["tid"], w[4], w[3], w[0]))
    else:
        check(w[2] & sched_rules.IRQ_FLAGS, "%s: the report says %r woke %d; the waking "
              "has flags %#x" % (path, woken, r["tid"], w[2]))


@test
def native_wakers_are_the_recorded_ones():
    """The waker Perfetto infers for each waking (whatever ran on the bundle's CPU then) is
    the one the monitor recorded: the releaser for the futex wake, and for every breach of
    the run whose wakeup lies in a dump's window; the demo's breach, woken by a timer, has
    interrupt context."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run, path, r = futex_off_cpu_dump(out, 3)
        releaser = run.events("release")[0]["tid"]
        check(r["woken_by"] and r["woken_by"]["source"] == "task" and
              r["woken_by"].get("tid") == releaser,
              "%s: the report's waker %r, the releaser is %d" % (path, r["woken_by"], releaser))
        check_breach_waker(path, r)
        compared = sum(check_wakers(p, run.breaches())
                       for p in glob.glob(os.path.join(out, "*.perfetto-trace")))
        check(compared > 0, "no task wakeup with its waker's thread in %s" % out)
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "1ms", "--max-dumps", "1", "--output",
                        out, "--no-children", "--", workload("demo_service"), "2"], timeout=120)
        check(run.rc == 0, run.describe())
        for p in glob.glob(os.path.join(out, "*.perfetto-trace")):
            check_wakers(p, run.breaches())
            check_breach_waker(p, report_json(p))


# X wakes W, W wakes T, through pipes; only T is hybtrace's target. X waits for its first
# line on stdin, then wakes W every 30 ms until stdin closes.
WAKE_CHAIN = r'''
import os, select, sys, time
r1, w1 = os.pipe()
r2, w2 = os.pipe()
t = os.fork()
if t == 0:
    os.close(w1); os.close(w2)
    while os.read(r2, 1):
        pass
    os._exit(0)
w = os.fork()
if w == 0:
    os.close(w1); os.close(r2)
    while True:
        b = os.read(r1, 1)
        if not b:
            os._exit(0)
        os.write(w2, b)
os.close(r1); os.close(r2); os.close(w2)
print(t, w, os.getpid(), flush=True)
sys.stdin.readline()
while not select.select([sys.stdin], [], [], 0.03)[0]:
    os.write(w1, b"x")
'''


@test
def wakeups_of_tasks_not_targeted_are_native():
    """The flight recorder holds every task's wakeups, not only the target's: in a chain X
    wakes W wakes T where only T is targeted, the dump of T's off-CPU breach has W's
    runnable state with X as its waker, and Perfetto's critical path of T over the breach
    runs back through W to X."""
    need_root()
    trace_processor()
    chain = subprocess.Popen([sys.executable, "-c", WAKE_CHAIN], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        t, w, x = (int(v) for v in chain.stdout.readline().split())
        with tempfile.TemporaryDirectory() as out:
            ht = Attached(["--pid", str(t), "--json", "--rq-delay", "off", "--off-cpu",
                           "20ms", "--min-interval", "0ms", "--max-dumps", "1", "--output",
                           out])
            try:
                ht.wait_attached()
                chain.stdin.write("go\n")
                chain.stdin.flush()
                wait_for(lambda: glob.glob(os.path.join(out, "*.perfetto-trace")), 30,
                         "a dump of %d's off-CPU breach" % t)
                check(ht.stop() == 0, ht.describe())
            finally:
                ht.close()
            path, r = dump_of_kind(out, "off-cpu", t)
            check(r["woken_by"] and r["woken_by"].get("tid") == w,
                  "%s: the breach of %d is not woken by %d: %r" % (path, t, w, r["woken_by"]))
            check_no_import_errors(path)
            rows = thread_states(path, w, r["start_ns"], r["end_ns"])
            check(any(s["state"] == "R" and s["waker"] == x for s in rows),
                  "%s: no runnable state of %d (not targeted) woken by %d: %r"
                  % (path, w, x, rows))
            path_tids = critical_path_tids(path, t, r["start_ns"], r["end_ns"])
            check({w, x} <= path_tids, "%s: the critical path of %d over its breach holds "
                  "%r, not the waker %d and its waker %d" % (path, t, sorted(path_tids), w, x))
    finally:
        chain.stdin.close()
        chain.wait(timeout=10)
