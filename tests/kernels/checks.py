# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The kernel matrix's scenarios: what each one runs (a line of the plan scenarios.sh
executes on each kernel) and what its output must show, checked here on the host.

Times under TCG are approximate and a guest's clock is slow: the checks assert
culprits, wakers, kinds and counts, never latencies.
"""
import glob
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                "integration"))
from harness import (HYBTRACE, Failure, Run, breakpoints_fire, check, check_rows,  # noqa: E402
                     read_log)

# The defects the kernel matrix shows (issue 14, and what the matrix found beyond it). A
# scenario that shows one is an expected failure (XFAIL) on the kernels named here;
# `make test-kernels` still counts it as failed, the suite (`tests/run`) does not. When a
# fix lands, its commit removes the kernel (or the whole entry) here, and the scenario must
# pass from then on; one that passes while still listed says XPASS.
KNOWN_DEFECTS = {
    # None at present. The last, 2b (hybtrace ran instead of its target after it knew the
    # target's CPU, on both 6.1 kernels), ended with the guard's turns at SCHED_FIFO for the
    # dump builder (builder_guard.h): a builder preempted at nice 19 inside a kernel section
    # the event loop waits on (their mmap lock, their file table's, on PREEMPT_RT a sleeping
    # spinlock, or a section it may not migrate in while hybtrace moves it) had held the
    # event loop up for hundreds of ms, which a nice raise could not end before EEVDF
    # (README, "it keeps its threads": 145 boots of both kernels passed with it).
}


class Unmet(Failure):
    """What a check needs before it can judge (the workload ran, hybtrace exited 0, the
    dump it reads exists): a failure even where the scenario's defect is known."""


def need(cond, message):
    if not cond:
        raise Unmet(message)


class Result:
    """What a scenario left in its directory: exit status, output, workload log, dumps."""

    def __init__(self, path, kernel=None):
        self.path = path
        self.kernel = kernel  # "running": this machine, whose hardware the tests can probe
        self.rc = int(self._read("rc", "-1").strip() or -1)
        self.run = Run(self.rc, self._read("stdout"), self._read("stderr"),
                       read_log(os.path.join(path, "workload.log")))
        self.dumps = sorted(glob.glob(os.path.join(path, "dumps", "*.perfetto-trace")))
        self._reports = None

    def _read(self, name, default=""):
        try:
            with open(os.path.join(self.path, name), errors="replace") as f:
                return f.read()
        except OSError:
            return default

    def ok(self):
        need(self.rc == 0, "hybtrace exited %d\n%s" % (self.rc, self.run.describe()))

    def reports(self):
        """Every dump read back as `report --json --all` by this machine's hybtrace, after
        the report the guest printed for it on its own kernel succeeded."""
        if self._reports is None:
            self._reports = []
            for path in self.dumps:
                guest_rc = self._read(os.path.join("dumps", os.path.basename(path) +
                                                   ".report-rc"), "0").strip()
                check(guest_rc == "0", "report failed on the kernel for %s: %s" % (
                    os.path.basename(path), self._read(os.path.join(
                        "dumps", os.path.basename(path) + ".report"))[-500:]))
                p = subprocess.run([HYBTRACE, "report", "--json", "--all", path],
                                   capture_output=True, text=True, timeout=120)
                check(p.returncode == 0, "report %s: %s" % (path, p.stderr))
                self._reports.append(json.loads(p.stdout))
        return self._reports

    def events(self, name):
        return self.run.events(name)

    def first(self, name):
        found = self.events(name)
        need(found, "the workload did not log %s\n%s" % (name, self.run.describe()))
        return found[0]

    def hits(self):
        return [o for o in self.run.json_lines() if o.get("type") == "trigger"]


def untraced(b, what):
    """Whether the kernel did not trace WHAT ("wakeup", "switch-in") of breach or dump B,
    as B itself says: its waker, or the stack where it slept, is then not known. This
    machine's kernel hides one now and then (about one sleep in a few hundred beside a
    load; the matrix saw a live off-CPU breach with neither)."""
    return what in b.get("not_traced", [])


def few_untraced(breaches, what="wakeup"):
    """Those of BREACHES that say the kernel did not trace WHAT: they must stay rare."""
    out = [b for b in breaches if untraced(b, what)]
    check(len(out) <= max(1, len(breaches) // 4), "%d of %d breaches say the kernel did not "
          "trace their %s" % (len(out), len(breaches), what))
    return out


def culprit_names(ran_instead, min_share=0.0, total_ns=None):
    """comm[pid] of each task that ran instead, the longest first."""
    out = []
    for c in ran_instead:
        name = c["task"] if "task" in c else "%s[%d]" % (c["comm"], c["pid"])
        if total_ns and c["ns"] < min_share * total_ns:
            continue
        out.append(name)
    return out


# --- the monitor -------------------------------------------------------------------------

def check_rq_delay(r, dumps=True):
    r.ok()
    start = r.first("contention_start")
    end = r.first("contention_end")
    victim, hog = start["tid"], start["hog_pid"]
    breaches = [b for b in r.run.breaches("rq-delay")
                if b["tid"] == victim and b["end_ns"] > start["ts_ns"]
                and b["start_ns"] < end["ts_ns"]]
    check(len(breaches) >= 5, "%d rq-delay breaches of the victim, want >= 5\n%s"
          % (len(breaches), r.run.describe()))
    for b in breaches:
        charged = sum(c["ns"] for c in b["ran_instead"]) + b["ran_instead_other_ns"]
        check(abs(charged + b["ran_instead_unknown_ns"] + b["ran_instead_idle_ns"]
                  - b["duration_ns"]) <= 10,
              "culprit times do not add up to the wait: %r" % b)
    # Other tasks take turns on a slow guest's CPU too (rq-delay-self says which must not):
    # the hog is named in most waits.
    named = [b for b in breaches if "rq_hog[%d]" % hog in culprit_names(b["ran_instead"])]
    check(len(named) >= len(breaches) * 0.6, "the hog %d was named in %d of %d breaches: %r"
          % (hog, len(named), len(breaches), [b["ran_instead"] for b in breaches][:5]))
    if not dumps:
        return
    # A dump's window may hold other tasks as well (hybtrace itself is slow under TCG):
    # the hog must be named in one at least, with the kernel stack.
    reports = [d for d in r.reports() if d.get("tid") == victim and d["kind"] == "rq-delay"
               and d["end_ns"] > start["ts_ns"] and d["start_ns"] < end["ts_ns"]]
    check(reports, "no rq-delay dump of the victim during the contention: %r" % r.dumps)
    check(any("rq_hog[%d]" % hog in culprit_names(d["ran_instead"]) for d in reports),
          "no dump names the hog: %r" % [d["ran_instead"] for d in reports])
    for d in reports:
        # Where the kernel did not trace its switch-in, the stack is not known, and says so.
        check(d["kernel_stack"] or untraced(d, "switch-in"), "no kernel stack in the dump")


# How long hybtrace may take to move off its target's CPU once a breach there told it (the
# event loop reads the breaches in order; under TCG a breach's line takes milliseconds, and
# 6.1-rt moved 55 ms after the breach's end).
SELF_MOVE_NS = 200_000_000


def check_not_a_culprit_itself(r):
    """Issue 14 defect 2, its second half (2b): hybtrace's own reporting is never what ran
    instead of its target. The victim of rq-delay waits behind the hog on CPU 0, and every
    wait is a breach hybtrace reports. The victim pins itself there after hybtrace attached:
    hybtrace learns it at the victim's first breach there after that, keeps its threads off
    that CPU from then on, and says so once. Returns what irq_work cost."""
    r.ok()
    start, end = r.first("contention_start"), r.first("contention_end")
    pinned = r.first("pinned")
    said = [line for line in r.run.stderr.splitlines()
            if "off its target's CPU %d," % start["cpu"] in line]
    check(len(said) == 1, "want one line saying hybtrace keeps off CPU %d, got %r"
          % (start["cpu"], said))
    breaches = sorted((b for b in r.run.breaches("rq-delay") if b["tid"] == start["tid"]
                       and b["end_ns"] > start["ts_ns"] and b["start_ns"] < end["ts_ns"]),
                      key=lambda b: b["start_ns"])
    there = [b for b in breaches if b["cpu"] == start["cpu"] and b["start_ns"] > pinned["ts_ns"]]
    need(there, "no wait of the victim on CPU %d after it pinned itself there\n%s"
         % (start["cpu"], r.run.describe()))
    told_ns = there[0]["end_ns"] + SELF_MOVE_NS
    later = [b for b in breaches if b["start_ns"] >= told_ns]
    mine = [b for b in later if any(c["comm"].startswith("hybtrace") for c in b["ran_instead"])]
    # What finds the cause when it shows: which of hybtrace's threads ran, when (from the
    # first wait there), what hybtrace said of its CPUs, and when it moved: after the
    # wait (it reacted late) or before (it ran where it had left).
    moved_ns = own_cpus_moved_ns(r, said[0])
    check(later and not mine,
          "hybtrace ran instead of its target in %d of %d waits after it knew its CPU, "
          "%.2f ms in all: %r; the first wait there ended at %d, hybtrace moved %s; "
          "hybtrace said: %r" % (
              len(mine), len(later), sum(c["ns"] for b in mine for c in b["ran_instead"]
                                         if c["comm"].startswith("hybtrace")) / 1e6,
              [("%+.1f ms" % ((b["start_ns"] - there[0]["end_ns"]) / 1e6), b["cpu"],
                [(c["comm"], c["pid"], c["ns"]) for c in b["ran_instead"]])
               for b in mine][:3], there[0]["end_ns"],
              "at %+.1f ms" % ((moved_ns - there[0]["end_ns"]) / 1e6) if moved_ns else
              "(time unknown)",
              [line for line in r.run.stderr.splitlines() if "CPU" in line][:5]))
    # What hybtrace still costs: each breach wakes it through an irq_work, which PREEMPT_RT
    # runs in the irq_work/N thread of the breach's CPU, ahead of the victim.
    irq_work_ns = sorted(sum(c["ns"] for c in b["ran_instead"]
                             if c["comm"].startswith("irq_work/")) for b in later)
    ran = [ns for ns in irq_work_ns if ns]
    return ("irq_work/N ran instead of the victim in %d of its %d waits%s" % (
        len(ran), len(later), ", %.0f us each (median), %.0f us at most"
        % (ran[len(ran) // 2] / 1e3, ran[-1] / 1e3) if ran else ""))


def own_cpus_moved_ns(r, line):
    """When hybtrace moved its threads, as CLOCK_MONOTONIC: its LINE says when since its
    start ("from 1.883075 s on"), and a breach line's time_s is its end since that start."""
    m = re.search(r"from (\d+\.\d+) s on", line)
    live = r.run.breaches()
    if not m or not live:
        return None
    start_ns = live[0]["end_ns"] - round(live[0]["time_s"] * 1e9)
    return start_ns + round(float(m.group(1)) * 1e9)


def preempt_rt(r):
    """Whether the kernel R ran on is PREEMPT_RT (None: not known)."""
    try:
        with open(os.path.join(os.path.dirname(r.path), "_info", "info")) as f:
            return "PREEMPT_RT" in f.read()
    except OSError:
        return None


def check_softirq_timer_wakes_are_the_timers(r):
    """With every timer callback's entry missed (the test mode; PREEMPT_RT's preemptible
    programs miss some for real, counted in lost.recursion), a sleep woken in the timer
    softirqs is still the timer's: on PREEMPT_RT a sleep's timer is soft, run by
    ktimers/N in the hrtimer softirq. Elsewhere the sleeps' timers are hard and a missed
    entry leaves their interrupt unknown: not judged there."""
    r.ok()
    if not preempt_rt(r):
        return "not PREEMPT_RT: the sleeps' timers are hard, nothing to judge"
    check_sleeps_woken_by_the_timer(r)
    return None


def check_off_cpu(stack_words, dumps=True):
    def check_fn(r):
        r.ok()
        blocks = list(zip(r.events("block_start"), r.events("block_end"), r.events("release")))
        check(blocks, "the workload did not log its rounds\n" + r.run.describe())
        victim = blocks[0][0]["tid"]
        mine = [b for b in r.run.breaches("off-cpu") if b["tid"] == victim]
        few_untraced(mine, "wakeup")
        few_untraced(mine, "switch-in")
        for start, end, release in blocks:
            # A block is one breach between its bounds (the clock is coarse: 5 ms margin).
            b = [b for b in mine if b["start_ns"] >= start["ts_ns"] - 5_000_000
                 and b["end_ns"] <= end["ts_ns"] + 5_000_000]
            check(len(b) == 1, "want one off-cpu breach of tid %d in [%d, %d], got %d\n%s"
                  % (victim, start["ts_ns"], end["ts_ns"], len(b), r.run.describe()))
            b = b[0]
            waker = b["woken_by"]
            check((waker and waker["source"] == "task" and waker["tid"] == release["tid"])
                  or (not waker and untraced(b, "wakeup")),
                  "woken by %r, want releaser %d" % (waker, release["tid"]))
            check(b["state"] == "S", "state %r, want S" % b["state"])
            stack = " ".join(b["kernel_stack"])
            check(any(w in stack for w in stack_words)
                  or (not stack and untraced(b, "switch-in")),
                  "stack %s lacks %r" % (stack, stack_words))
        if not dumps:
            return
        # A dump's wakeup chain begins at the wakeup it recorded.
        reports = [d for d in r.reports() if d["kind"] == "off-cpu" and d.get("tid") == victim
                   and not untraced(d, "wakeup")]
        check(reports, "no off-cpu dump of tid %d: %r" % (victim, r.dumps))
        chain = reports[0]["wakeup_chain"]
        releasers = {e["tid"] for e in r.events("release")}
        check(chain and chain[0]["waker_tid"] in releasers,
              "wakeup chain %r, want a releaser of %r" % (chain, releasers))
        check(reports[0]["off_cpu"]["state"] == "S", "dump state %r" % reports[0]["off_cpu"])
    return check_fn


def check_loopback_wakeup(r):
    """Issue 15 item 5: loopback TCP runs the receiver's net_rx softirq in the sender's
    send, and that wakes the receiver (pinned to CPU 1, behind a SCHED_FIFO hog that spins
    from 2 ms before each reply to 3 ms after): each wait names the softirq and the
    sender (or ksoftirqd, where the kernel deferred it), what ran instead is what held the
    CPU after the wakeup, and the idle task never is."""
    r.ok()
    start, sends = r.events("pingpong_start"), r.events("send")
    need(start and sends, "the workload did not log its rounds\n" + r.run.describe())
    receiver, sender, hog = start[0]["tid"], sends[0]["tid"], start[0]["hog_pid"]
    mine = [b for b in r.run.breaches("off-cpu") if b["tid"] == receiver]
    unwoken = few_untraced(mine)
    named = slept = 0
    for send in sends:
        # A slow guest's receiver may reach its recv after the reply came: no wait then.
        b = [b for b in mine if b["start_ns"] < send["ts_ns"] < b["end_ns"]]
        if not b:
            continue
        slept += 1
        b = b[0]
        if b in unwoken:
            continue
        waker = b["woken_by"] or {}
        check(waker.get("source") == "softirq" and waker.get("softirq") == "net_rx",
              "woken by %r, want softirq (net_rx)" % waker)
        named += waker.get("tid") == sender and waker.get("comm") == "pp_sender"
        runnable_ns = b["end_ns"] - waker["at_ns"]
        held = sum(c["ns"] for c in b["ran_instead"] if c["pid"] == hog)
        check(held <= runnable_ns + 10_000, "the hog held the CPU %d ns of a wait runnable "
              "for %d ns after its wakeup: %r" % (held, runnable_ns, b["ran_instead"]))
    check(slept >= len(sends) * 0.5, "only %d of %d replies came while the receiver slept\n%s"
          % (slept, len(sends), r.run.describe()))
    check(named >= (slept - len(unwoken)) * 0.6, "%d of %d waits name pp_sender[%d]: %r"
          % (named, slept, sender, [b["woken_by"] for b in mine][:5]))
    for b in r.run.breaches():
        check(all(c["pid"] != 0 for c in b["ran_instead"]),
              "the idle task as what ran instead: %r" % b["ran_instead"])


def check_softirq_on_irq_exit(r):
    """Issue 15 item 5: a softirq run on a hardirq's way out names no task. tcp_pingpong
    rps steers loopback packets to the receiver's CPU 1, where the sender's send raises
    net_rx by an IPI; net_rx runs on the IPI's exit, in pp_bystander spinning on CPU 1 in
    user mode and in the kernel in turn, or in a task's context: ksoftirqd/1, or any
    task's local_bh_enable on CPU 1 (on PREEMPT_RT, where a hardirq's exit only wakes
    ksoftirqd, rcuc/1 was seen to run it). No wait names the bystander, which never
    disables bottom halves, or the sender, on CPU 0. Most name no one, but on PREEMPT_RT."""
    r.ok()
    rt = preempt_rt(r) is not False  # unknown: judge only what holds on both
    unnamed = 0
    start, sends = r.events("pingpong_start"), r.events("send")
    need(start and sends, "the workload did not log its rounds\n" + r.run.describe())
    receiver = start[0]["tid"]
    mine = [b for b in r.run.breaches("off-cpu") if b["tid"] == receiver]
    unwoken = few_untraced(mine)
    slept = 0
    for send in sends:
        b = [b for b in mine if b["start_ns"] < send["ts_ns"] < b["end_ns"]]
        if not b:
            continue
        slept += 1
        if b[0] in unwoken:
            continue
        waker = b[0]["woken_by"] or {}
        check(waker.get("source") == "softirq" and waker.get("softirq") == "net_rx"
              and waker.get("tid") not in (start[0]["bystander_pid"], sends[0]["tid"]),
              "woken by %r, want softirq (net_rx) in no task (bystander %d, sender %d)"
              % (waker, start[0]["bystander_pid"], sends[0]["tid"]))
        unnamed += "tid" not in waker
    check(slept >= len(sends) * 0.5, "only %d of %d replies came while the receiver slept\n%s"
          % (slept, len(sends), r.run.describe()))
    check(rt or unnamed >= (slept - len(unwoken)) * 0.5, "%d of %d waits woken on an "
          "interrupt's exit: %r" % (unnamed, slept, [b["woken_by"] for b in mine][:5]))


def sleeper_breaches(r):
    """The sleeper's rounds and its syscall breach in each."""
    r.ok()
    sleeps = list(zip(r.events("sleep_start"), r.events("sleep_end")))
    need(sleeps, "the workload did not log its sleeps\n" + r.run.describe())
    tid = sleeps[0][0]["tid"]
    mine = [b for b in r.run.breaches("syscall") if b["tid"] == tid
            and b["syscall"] in ("clock_nanosleep", "nanosleep")]
    out = []
    for start, end in sleeps:
        b = [b for b in mine if b["start_ns"] >= start["ts_ns"] - 5_000_000
             and b["end_ns"] <= end["ts_ns"] + 5_000_000]
        check(len(b) == 1, "want one syscall breach of tid %d in [%d, %d], got %d\n%s"
              % (tid, start["ts_ns"], end["ts_ns"], len(b), r.run.describe()))
        b = b[0]
        check(b["syscall"] in ("clock_nanosleep", "nanosleep"), "syscall %r" % b["syscall"])
        check(b["syscall_ret"] == 0, "return value %r" % b["syscall_ret"])
        out.append(b)
    return tid, out


def unseen_switch_ins(r):
    """Switch-ins of the target the kernel's tracepoints skipped, with the wakeup before
    them (about one sleep in a few hundred on a loaded KVM guest): the summary counts each,
    and such a sleep's breach has neither its waker nor the stack it slept on."""
    summary = r.run.summary() or {}
    return summary.get("lost", {}).get("unseen_switch_in", 0)


def check_syscall(r):
    tid, breaches = sleeper_breaches(r)
    reports = [d for d in r.reports() if d["kind"] == "syscall" and d.get("tid") == tid]
    check(reports, "no syscall dump of tid %d: %r" % (tid, r.dumps))
    stack = " ".join(reports[0]["kernel_stack"])
    check("nanosleep" in stack or (not stack and (unseen_switch_ins(r) or
                                                  untraced(reports[0], "switch-in"))),
          "the dump's stack lacks the nanosleep: %s" % stack)
    names = {l["name"] for l in reports[0]["timeline"]}
    check(names & {"clock_nanosleep", "nanosleep"}, "no nanosleep slice in the dump")


def check_sleeps_woken_by_the_timer(r):
    """Issue 14 defect 2: each sleep is woken by the timer: a breach's waker is the wakeup
    that ended its sleep, whatever preemptions follow it (on PREEMPT_RT the irq_work thread
    that wakes hybtrace preempts the sleeper right after its timer woke it)."""
    tid, breaches = sleeper_breaches(r)
    untold = [b for b in breaches if not b["woken_by"] and not untraced(b, "wakeup")]
    few_untraced(breaches)
    check(len(untold) <= unseen_switch_ins(r), "%d breaches without a waker (none saying the "
          "kernel did not trace it), %d switch-ins unseen" % (len(untold), unseen_switch_ins(r)))
    for b in breaches:
        check(not b["woken_by"] or b["woken_by"]["source"] == "timer",
              "syscall %.2fms tid %d state %s woken by %r, want the timer" % (
                  b["duration_ns"] / 1e6, tid, b["state"], b["woken_by"]))


def check_summary_counts(r):
    r.ok()
    s = r.run.summary()
    check(s, "no summary\n" + r.run.describe())
    sleeps = r.first("storm_end")["sleeps"]
    live = r.run.breaches()
    check(s["detected"] == len(live) + s["lost"]["ring_buffer"],
          "detected %d != reported %d + dropped %d" % (s["detected"], len(live),
                                                       s["lost"]["ring_buffer"]))
    for kind, counts in s["breaches"].items():
        n = len([b for b in live if b["kind"] == kind])
        check(counts["count"] == n, "summary counts %d %s breaches, %d were printed"
              % (counts["count"], kind, n))
    storm = [b for b in r.run.breaches("syscall") if b["comm"] == "storm"]
    check(sleeps >= 100 and len(storm) >= sleeps * 0.9, "%d syscall breaches for %d sleeps"
          % (len(storm), sleeps))
    # The two worst are kept: more may have been written, each worse one replacing one.
    written = [o for o in r.run.json_lines() if o.get("type") == "dump"]
    replaced = [o for o in r.run.json_lines() if o.get("type") == "dump_replaced"]
    check(s["dumps"]["kept"] == len(r.dumps) == 2 and s["dumps"]["written"] == len(written)
          and s["dumps"]["replaced"] == len(replaced) == len(written) - 2,
          "dumps: summary %r, %d written and %d replaced lines, files %d, want 2 kept "
          "(--max-dumps 2)" % (s["dumps"], len(written), len(replaced), len(r.dumps)))
    skipped = sum(s["dumps"]["skipped"].values())
    check(skipped + s["dumps"]["written"] >= len(live) * 0.99,
          "dump decisions do not add up: %r" % s["dumps"])


def check_migration(r):
    """Issue 14 defect 3: the migrator runs on CPU 1 and pins itself to CPU 0 while a
    SCHED_FIFO hog spins there; its wait begins on CPU 1 and is spent behind the hog. The
    live line and the dump name the hog, the same culprits everywhere."""
    r.ok()
    migrate, migrated = r.first("migrate"), r.first("migrated")
    hog = "fifo_hog[%d]" % migrate["hog_pid"]
    # The first wait from the pin on that ends on CPU 0 is the one across the migration
    # (one on CPU 1 before the move is behind whatever ran there: beside a busy host,
    # hybtrace for 10.75 ms; later ones within the call are the thread's own preemptions on
    # CPU 0).
    waits = [b for b in r.run.breaches("rq-delay") if b["tid"] == migrate["tid"]
             and b["cpu"] == 0 and b["end_ns"] > migrate["ts_ns"]
             and b["start_ns"] < migrated["ts_ns"]]
    need(waits, "no wait across the migration\n" + r.run.describe())
    live = min(waits, key=lambda b: b["start_ns"])
    said = culprit_names(live["ran_instead"], 0.1, live["duration_ns"])
    reports = [d for d in r.reports() if d["kind"] == "rq-delay" and
               (d["tid"], d["start_ns"], d["end_ns"]) ==
               (live["tid"], live["start_ns"], live["end_ns"])]
    need(reports, "no dump of the wait across the migration: %r" % r.dumps)
    dumped = culprit_names(reports[0]["ran_instead"], 0.1, reports[0]["duration_ns"])
    check(said[:1] == [hog] and said == dumped,
          "a %.2fms wait from CPU %d to CPU %d behind %s: live names %r, the dump %r" % (
              live["duration_ns"] / 1e6, live["wake_cpu"], live["cpu"], hog, said, dumped))


# --- on-CPU sampling -----------------------------------------------------------------------

def samples_of(line):
    """How many samples a report's timeline slice holds ("work_a 39.95ms (8 samples)")."""
    m = re.search(r"\((\d+) samples\)", line["what"])
    return int(m.group(1)) if m else 0


def check_call_structure(r):
    r.ok()
    tid = r.first("a_start")["tid"]
    reports = [d for d in r.reports() if d["kind"] == "syscall" and d.get("tid") == tid]
    check(reports, "no syscall dump of tid %d: %r" % (tid, r.dumps))
    rep = reports[0]
    base = rep["start_ns"]
    # Times from the breach's start: the round before it (a later round may begin in the
    # window's last milliseconds).
    slices = [(l["name"], l["t_ns"], l["t_ns"] + l["dur_ns"], samples_of(l))
              for l in rep["timeline"]
              if l["thread"].endswith("[%d]" % tid) and "samples)" in l["what"]
              and l["t_ns"] < 0]
    # A sample taken in work_b's first instructions, before its frame is set up, unwinds
    # past work_a through the caller's frame pointer (perf's fp callchains alike): one
    # sample of work_b outside work_a. Under TCG an interrupt lands on a translated
    # block's boundary, a function's entry among them, so it shows there (6.1-rt, once
    # in about 40 runs): at most one such sample a round, two rounds in the window.
    a_slices = [s for s in slices if s[0] == "work_a"]
    entry = [s for s in slices if s[0] == "work_b" and s[3] == 1 and
             not any(a[1] <= s[1] and s[2] <= a[2] for a in a_slices)]
    check(len(entry) <= 2, "%d lone samples of work_b outside work_a: %r" % (len(entry), entry))
    slices = [s for s in slices if s not in entry]

    def span(name):
        found = [s for s in slices if s[0] == name]
        check(found, "no %s slice among %r" % (name, sorted({s[0] for s in slices})[:30]))
        return min(s[1] for s in found), max(s[2] for s in found)

    a, b, c = span("work_a"), span("work_b"), span("work_c")
    check(a[0] <= b[0] and b[1] <= a[1], "work_b %r is not inside work_a %r" % (b, a))
    check(c[0] >= a[1] - 5_000_000, "work_c %r overlaps work_a %r" % (c, a))
    log = {}
    for e in r.run.log:
        log.setdefault(e["event"], e["ts_ns"] - base)
    check(a[0] < log["a_end"] and c[1] > log["c_start"],
          "slices outside the workload's phases: a %r c %r log %r" % (a, c, log))
    check(rep["user_stack_before"], "no user stack before the breach")
    check(rep["metadata"].get("samples_of_other_processes") == "0",
          "other processes' samples: %r" % rep["metadata"])


def check_exit_dump_samples(r):
    """The target touches memory (on the CPU, sampled) and exits; the exit dump's window
    holds that. On 6.1 a sample taken while the exit frees the memory (user registers, no
    user stack to copy) writes its last 8 bytes over the header of the sample before it in
    the backward ring (see overran_its_end() in userspace/sources/sample/sampler.c): the dump must still
    hold the samples before it."""
    r.ok()
    tid = r.first("touch_start")["tid"]
    r.first("touch_end")
    reports = [d for d in r.reports() if d["kind"] == "exit"]
    need(reports, "no exit dump: %r" % r.dumps)
    meta = reports[0]["metadata"]
    names = {l["name"] for l in reports[0]["timeline"] if "samples)" in l["what"]
             and l["thread"].endswith("[%d]" % tid)}
    check(int(meta["samples_in_window"]) >= 10 and names,
          "%s samples in the exit dump's window, user slices %r, of a target on the CPU "
          "for the window's whole first part (touching memory)"
          % (meta["samples_in_window"], sorted(names)[:10]))
    check(meta.get("loss.samples_unreadable") == "0",
          "sampling records that did not parse: %s (%s headers rebuilt)"
          % (meta.get("loss.samples_unreadable"), meta.get("samples_header_rebuilt")))


# --- code triggers ---------------------------------------------------------------------

def check_trigger_calls(r):
    """`run` with a trigger on a function of the program it starts: the exec comes after
    the attach (issue 14 defect 1 at paranoid 3)."""
    r.ok()
    calls = r.events("call")
    hits = r.hits()
    need(len(calls) == 3, "the workload made %d calls" % len(calls))
    check(len(hits) == 1, "%d hits without --multi, want 1\n%s" % (len(hits),
                                                                  r.run.describe()))
    check(hits[0]["args"] == calls[0]["args"], "registers %r, the call passed %r"
          % (hits[0]["args"], calls[0]["args"]))
    reports = [d for d in r.reports() if d["kind"] == "trigger"]
    check(len(reports) == 1 and reports[0]["trigger"]["function"] == "send_order"
          and reports[0]["trigger"]["args"] == calls[0]["args"],
          "the dump does not hold the hit: %r" % [d.get("trigger") for d in reports])


def check_trigger_dlopen(r):
    r.ok()
    hits = r.hits()
    dlopened = r.first("dlopened")["ts_ns"]
    check(len(hits) == 2, "%d hits for 2 calls after dlopen\n%s" % (len(hits),
                                                                    r.run.describe()))
    check(all(h["args"] == [1, 2, 3] and h["time_ns"] > dlopened for h in hits),
          "hits %r, dlopen at %d" % (hits, dlopened))


def check_trigger_pid_dlopen(r):
    """--pid on a target that loads the library after the attach: the spec waits for it,
    then is armed in it after the capability drop (issue 14 defect 1 at paranoid 3)."""
    check_trigger_dlopen(r)
    waits = [l for l in r.run.stderr.splitlines() if " waits: " in l]
    check(len(waits) == 1 and "no module libtrig.so" in waits[0],
          "the spec did not wait for the library:\n" + r.run.describe())


def check_trigger_exec(r):
    """--pid on a target that execs once its trigger is armed: the new image's function is
    armed again, after the capability drop (issue 14 defect 1 at paranoid 3)."""
    r.ok()
    hits = r.hits()
    execed = r.first("exec")["ts_ns"]
    calls = [c["args"] for c in r.events("call")]
    need(len(calls) == 2, "the new image made %d calls" % len(calls))
    check([h["args"] for h in hits] == calls and all(h["time_ns"] > execed for h in hits),
          "hits %r after the exec at %d, calls %r\n%s" % (hits, execed, calls,
                                                          r.run.describe()))


def check_trigger_stop_and_plt(r):
    r.ok()
    hits = r.hits()
    rounds = len(r.events("before"))
    got = sorted(h["function"] for h in hits)
    check(rounds == 3 and got == ["getppid"] * 6 + ["hybtrace_trigger"],
          "hits %r for %d rounds of two getppid and one hybtrace_trigger\n%s"
          % (got, rounds, r.run.describe()))
    stop = [h for h in hits if h["function"] == "hybtrace_trigger"][0]
    check(stop["args"][0] == 1, "hybtrace_trigger(1) hit with %r" % stop["args"])


def check_trigger_pid_times(r):
    """Issue 14 defect 4: the target calls the function every 5 ms from its start until
    hybtrace attached; every hit's time is since the attach began, never negative."""
    r.ok()
    hits = r.hits()
    calls = [c["args"] for c in r.events("call")]
    check(hits, "no hit for %d calls\n%s" % (len(calls), r.run.describe()))
    for h in hits:
        check(h["args"] in calls, "a hit with %r, no call passed that" % h["args"])
    negative = [h["time_s"] for h in hits if h["time_s"] < 0]
    check(not negative, "%d of %d hits before the clock's zero: time_s %r"
          % (len(negative), len(hits), negative[:5]))


def check_trigger_pid_exit(r):
    """Defect 5: the target calls the function every 5 ms from before the triggers are armed
    until 5 calls after hybtrace says they are, then exits while hybtrace still attaches.
    hybtrace goes on (attached, a summary, exit 0), so the hits the kernel recorded while
    armed are reported too, or counted as lost: never dropped without a word."""
    r.ok()
    calls = [c["args"] for c in r.events("call")]
    hits = [h["args"] for h in r.hits()]
    need(calls and r.events("stopped"), "the target did not run\n" + r.run.describe())
    need(r.run.summary(), "no summary\n" + r.run.describe())
    check(hits, "no hit reported for the calls made after \"armed\" (%d calls in all)\n%s"
          % (len(calls), r.run.describe()))
    tail = calls[calls.index(hits[0]):] if hits[0] in calls else calls
    check(hits == tail, "%d hits, %d calls from the first hit to the last: %r missing"
          % (len(hits), len(tail), [c for c in tail if c not in hits][:5]))
    counted = r.run.summary()["triggers"]
    check(counted["hits"] == len(hits) and counted["lost"] == 0,
          "the summary counts %r for %d hits reported" % (counted, len(hits)))


# --- perf_event_paranoid 3 and CAP_SYS_ADMIN ----------------------------------------------

EACCES = 13


def perf_refused(r):
    """Whether the kernel refused without_caps a perf event without the capabilities it
    names (its "perf_open" line, the ground truth): Debian's kernels do at paranoid 3
    without CAP_SYS_ADMIN, mainline does not."""
    return r.first("perf_open")["errno"] == EACCES


def kept_where_needed(check_fn):
    """CHECK_FN, and: hybtrace said it keeps CAP_SYS_ADMIN after attaching exactly where
    the kernel refuses perf events without it (issue 14 defect 1)."""
    def check_it(r):
        check_fn(r)
        refused = perf_refused(r)
        said = [l for l in r.run.stderr.splitlines() if "keeps it after attaching" in l]
        check(len(said) == int(refused), "the kernel %s perf events without CAP_SYS_ADMIN, "
              "hybtrace said %r" % ("refuses" if refused else "opens", said))
    check_it.__doc__ = check_fn.__doc__
    return check_it


def check_trigger_without_admin(r):
    """Without CAP_SYS_ADMIN at paranoid 3: where the kernel refuses perf events then,
    one line and exit 2 before anything starts, never a trigger that silently does not
    fire; elsewhere the trigger fires as with it."""
    if not perf_refused(r):
        r.ok()
        calls, hits = r.events("call"), r.hits()
        check(len(hits) == 1 and len(calls) == 1 and hits[0]["args"] == calls[0]["args"],
              "hits %r for the calls %r\n%s" % (hits, calls, r.run.describe()))
        return
    err = r.run.stderr.strip()
    check(r.rc == 2 and "\n" not in err and "CAP_SYS_ADMIN" in err and
          "perf_event_paranoid" in err, "rc %d, stderr %r" % (r.rc, err))
    check(not r.events("call") and not r.run.stdout and not r.dumps,
          "something ran:\n" + r.run.describe())


def check_check_without_admin(r):
    """`hybtrace check` without CAP_SYS_ADMIN at paranoid 3 says perf events work exactly
    where the kernel opens them for it, and what they need."""
    refused = perf_refused(r)
    rows = check_rows(r.run.stdout)
    want = "no" if refused else "yes"
    got = {k: rows.get(k, ("?", ""))[0] for k in ("privileges", "perf events")}
    check(got == {"privileges": want, "perf events": want},
          "the kernel %s perf events without CAP_SYS_ADMIN; check says %r\n%s"
          % ("refuses" if refused else "opens", got, r.run.stdout))
    detail = rows["perf events"][1]
    check("kernel.perf_event_paranoid 3" in detail and ("CAP_SYS_ADMIN" in detail or
                                                         not refused),
          "perf events: %r" % detail)
    check((r.rc == 0) == (want == "yes"), "check exited %d" % r.rc)


# --- machine check -------------------------------------------------------------------------

def check_machine(r):
    """`hybtrace check` on the kernel: BTF, the tracepoint's prev_state, breakpoints,
    sampling, and the monitor loads."""
    text = r._read("check")
    # Some virtual machines take breakpoints and never fire them; qemu's guests do fire.
    fire = "no" if r.kernel == "running" and breakpoints_fire() is False else "yes"
    for line, want in [("kernel BTF", "yes"), ("sched_switch prev_state", "yes"),
                       ("hardware breakpoints", fire), ("cpu-clock sampling", "yes"),
                       ("perf events", "yes"), ("monitor programs", "yes")]:
        row = [l for l in text.splitlines() if l.strip().startswith(line)]
        check(row and row[0].strip()[len(line):].split()[0] == want,
              "check says %r, want %s\n%s" % (row, want, text))
    check("tracepoint argument" in text, "prev_state not from the tracepoint:\n" + text)


class Scenario:
    """One hybtrace run on each kernel and its check; or, with RUN, another check of the
    run of that name (no run of its own)."""

    def __init__(self, name, paranoid, mode, args, check_fn, defect=None, run=None):
        self.name = name
        self.paranoid = paranoid
        self.mode = mode
        self.args = args
        self.check = check_fn
        self.defect = defect
        self.run = run or name

    def plan_line(self):
        return "%s %d %s %s" % (self.name, self.paranoid, self.mode, self.args)


def also_checks(run, name, check_fn, defect=None):
    return Scenario(name, 0, "", "", check_fn, defect, run)


OUT = "--json --quiet --output $D/dumps"
# Under TCG other syscalls (execve, mmap, openat) take over 10 ms too: only the sleeps breach.
SLEEPS = "--syscall 10ms --syscalls clock_nanosleep"
# Waits at startup breach too (a slow guest; on RT the kernel's threads preempt the victim
# every few ms all along), and a dump being written passes over the first breaches of the
# intervals after it: the worst of each interval, the six worst kept, which the hog's waits
# are unless startup stalled longer.
RQ = "run %s --rq-delay 500us --min-interval 200ms --max-dumps 6 --no-children" % OUT
# Sampling interrupts cost tens of times more under TCG: a low rate and long phases. The
# first round's dump, frozen while the program runs on (a later one may be worse, and end
# in the exit).
SAMPLE = ("run %s --rq-delay off %s --min-interval 0ms --max-dumps 1 --dump-policy first "
          "--sample-freq 200 --pre 400ms" % (OUT, SLEEPS))
TRIG = "%s --rq-delay off --min-interval 0ms --max-dumps 1" % OUT
# hybtrace under without_caps: it tries a perf event without CAP_SYS_ADMIN first (the
# kernel's answer is the checks' ground truth), then runs hybtrace with it or without it.
PROBE = "$W/without_caps --probe-only cap_sys_admin"
NO_ADMIN = "$W/without_caps cap_sys_admin"

SCENARIOS = [
    Scenario("rq-delay", 3, "run", RQ + " -- $W/rq_contention 0 1500", check_rq_delay),
    also_checks("rq-delay", "rq-delay-self", check_not_a_culprit_itself),
    # The same with the dump builder started on the victim's CPU, in and out of the kernel
    # every 2 ms while idle: at nice 19 behind the hog, a kernel lock of their process that
    # it holds preempted holds up the event loop, and the move off that CPU (2b).
    Scenario("rq-delay-builder-busy", 3, "run", "HYBTRACE_TEST_BUILDER_BUSY_CPU=0 " + RQ +
             " -- $W/rq_contention 0 1500", check_not_a_culprit_itself),
    Scenario("rq-delay-task", 3, "run", RQ + " --prev-state task -- $W/rq_contention 0 1000",
             check_rq_delay),
    # The releaser's sleeps breach too, each right before the wait it ends: with
    # --min-interval 0ms each is a dump of its own (while the builder keeps up), and dumps
    # enough for the blocked thread's.
    Scenario("off-cpu", 3, "run", "run %s --rq-delay off --off-cpu 10ms --prev-state arg "
             "--min-interval 0ms --max-dumps 6 -- $W/offcpu_wake futex 20 2" % OUT,
             check_off_cpu(["futex"])),
    Scenario("off-cpu-task", 3, "run", "run %s --rq-delay off --off-cpu 10ms --prev-state "
             "task --min-interval 0ms --max-dumps 6 -- $W/offcpu_wake pipe 20 1" % OUT,
             check_off_cpu(["pipe_read", "vfs_read"])),
    Scenario("syscall", 3, "run", "run %s --rq-delay off %s --max-dumps 1 -- $W/sleeper 15 2"
             % (OUT, SLEEPS), check_syscall),
    also_checks("syscall", "syscall-waker", check_sleeps_woken_by_the_timer),
    Scenario("syscall-off-cpu", 3, "run", "run %s %s --off-cpu 10ms --max-dumps 0 "
             "-- $W/sleeper 15 3" % (OUT, SLEEPS), check_sleeps_woken_by_the_timer),
    # The timer callbacks' entries missed (as PREEMPT_RT's preemptible programs make some
    # miss): a sleep woken in the hrtimer softirq (ktimers/N on PREEMPT_RT) is still the timer's.
    Scenario("syscall-timer-entry-missed", 3, "run", "HYBTRACE_TEST_MISS_TIMER_ENTRIES=1 "
             "run %s %s --off-cpu 10ms --max-dumps 0 -- $W/sleeper 15 3" % (OUT, SLEEPS),
             check_softirq_timer_wakes_are_the_timers),
    Scenario("loopback-wakeup", 3, "run", "run %s --rq-delay off --off-cpu 1ms "
             "--max-dumps 0 --no-children -- $W/tcp_pingpong 20 10 hog" % OUT, check_loopback_wakeup),
    Scenario("softirq-irq-exit", 3, "run", "run %s --rq-delay off --off-cpu 1ms "
             "--max-dumps 0 --no-children -- $W/tcp_pingpong 20 10 rps" % OUT, check_softirq_on_irq_exit),
    # The same with timer callbacks' exits missed (PREEMPT_RT's preemptible programs miss
    # some: 6.1-rt named a timer for a receiver woken in net_rx after one): a callback is over
    # once a softirq began after it. The test mode misses the exits of those that did not
    # interrupt a softirq: one that did, unseen to return, is not told from the softirq's
    # later wakeups (with every exit missed, 6.1 cloud named the timer once).
    Scenario("softirq-timer-exit-missed", 3, "run", "HYBTRACE_TEST_MISS_TIMER_EXITS=1 "
             "run %s --rq-delay off --off-cpu 1ms --max-dumps 0 --no-children "
             "-- $W/tcp_pingpong 20 10 rps" % OUT, check_softirq_on_irq_exit),
    Scenario("summary", 3, "run", "run %s --syscall 1ms --min-interval 500ms --max-dumps 2 "
             "-- $W/breach_storm 2 2000" % OUT, check_summary_counts),
    # Waits at the start breach too on a slow guest: a threshold only the long wait behind
    # the hog passes for sure, and dumps enough for it. The hog spins 150 ms: under TCG
    # one host thread runs both vCPUs, and the migrator took more than 50 ms from the
    # hog's word to its pin once, when the hog was done (no wait at all).
    Scenario("migration", 3, "run", "run %s --rq-delay 10ms --min-interval 0ms --max-dumps 8 "
             "--no-children -- $W/migrate_wait 150" % OUT, check_migration),
    Scenario("sample-fp", 2, "run", SAMPLE + " -- $W/callstack 150 15 1",
             check_call_structure),
    Scenario("sample-fp-p3", 3, "run", SAMPLE + " -- $W/callstack 150 15 1",
             check_call_structure),
    # Two rounds: the first one's dump freezes while the second runs, not in the exit
    # (sample-dwarf-exit is the dump of the exit).
    Scenario("sample-dwarf", 3, "run", SAMPLE + " --callgraph dwarf -- $W/callstack_nofp "
             "150 15 2", check_call_structure),
    Scenario("sample-dwarf-exit", 3, "run", "HT_EXIT_TOUCH_MB=256 run %s --rq-delay off "
             "--callgraph dwarf --sample-freq 200 --pre 400ms --dump-on-exit -- "
             "$W/callstack_nofp 50 15 1" % OUT, check_exit_dump_samples),
    Scenario("trigger-run", 2, "run-ready", "run %s --trigger send_order -- "
             "$W/trigger_target calls 3" % TRIG, check_trigger_calls),
    Scenario("trigger-run-p3", 3, "run-ready", "%s run %s --trigger send_order -- "
             "$W/trigger_target calls 3" % (PROBE, TRIG), kept_where_needed(check_trigger_calls)),
    Scenario("trigger-run-p3-no-admin", 3, "run-ready", "%s run %s --trigger send_order -- "
             "$W/trigger_target calls 1" % (NO_ADMIN, TRIG), check_trigger_without_admin),
    Scenario("trigger-dlopen", 2, "run-ready", "run %s --multi --trigger libtrig.so:dl_order "
             "-- $W/trigger_target dlopen $W/libtrig.so" % TRIG, check_trigger_dlopen),
    Scenario("trigger-dlopen-p3", 3, "run-ready", "%s run %s --multi --trigger "
             "libtrig.so:dl_order -- $W/trigger_target dlopen $W/libtrig.so" % (PROBE, TRIG),
             kept_where_needed(check_trigger_dlopen)),
    Scenario("trigger-stop-plt", 2, "run-ready", "run %s --multi --trigger . --trigger "
             "libc.so.6:getppid -- $W/trigger_target marks 3" % TRIG,
             check_trigger_stop_and_plt),
    Scenario("trigger-pid-dlopen", 2, "pid-ready", "$W/trigger_target dlopen $W/libtrig.so "
             ":: %s --multi --trigger libtrig.so:dl_order" % TRIG, check_trigger_pid_dlopen),
    Scenario("trigger-pid-dlopen-p3", 3, "pid-ready", "$W/trigger_target dlopen "
             "$W/libtrig.so :: %s %s --multi --trigger libtrig.so:dl_order" % (PROBE, TRIG),
             kept_where_needed(check_trigger_pid_dlopen)),
    Scenario("trigger-pid-exec", 2, "pid-ready", "$W/trigger_target exec :: %s --multi "
             "--trigger send_order" % TRIG, check_trigger_exec),
    Scenario("trigger-pid-exec-p3", 3, "pid-ready", "$W/trigger_target exec :: %s %s --multi "
             "--trigger send_order" % (PROBE, TRIG), kept_where_needed(check_trigger_exec)),
    Scenario("trigger-pid-exit", 3, "pid-armed", "$W/trigger_target until :: %s --multi "
             "--trigger send_order" % TRIG, check_trigger_pid_exit),
    Scenario("check-p3-no-admin", 3, "run", "%s check" % NO_ADMIN, check_check_without_admin),
    Scenario("trigger-pid-times", 3, "pid", "$W/trigger_target until :: %s --multi "
             "--trigger send_order" % TRIG, check_trigger_pid_times),
]

# Checks of what every kernel's run left besides the scenarios (its _info directory).
MACHINE = Scenario("check", 0, "", "", check_machine)

