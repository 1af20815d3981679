# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Wait chains' hard cases, each against its workload's own log (tests/workloads/chain_cases.c,
tcp_pingpong.c): a lock convoy whose hand-offs make a cycle, a wakeup from a softirq run on
behalf of a task, a waker woken by a timer on an otherwise idle CPU, and --all.

Every chain is also held to what any chain must be (check_chain): it covers its breach; its
leaves follow one another from the wait's start to its end and add up to it; a blocked stretch
whose waker was followed is covered exactly by that waker's stretches one level down; no task is
twice on one path from the breached thread down, and a waker already on the path is where the
walk stopped, for a cycle; the idle task is never named.

Each workload runs until the test has the chains it needs (run_until): how many breaches get
a dump depends on how fast the machine builds them."""
import os
import subprocess
import tempfile
import time

from harness import (Attached, Control, Run, chains_fully_traced, check, need_root, read_log,
                     report_json, test, wait_for, whole_lines, workload)

# How far a stretch's edge may lie past the log's instant that bounds it: a thread's log is
# written from user space, a few microseconds from the kernel's instant it tells of, and the
# recorder reads the run queue's clock (bpf/clock.bpf.h), a little behind at times.
EDGE_NS = 50_000


def end_of(s):
    return s["start_ns"] + s["duration_ns"]


def leaves(chain):
    return [s for s in chain["stretches"] if s["leaf"]]


def followed(s):
    """A blocked stretch whose waker's stretches are its children."""
    return s["stretch"] == "blocked" and not s["leaf"]


def parent_of(chain, s):
    """The followed blocked stretch one level up whose span holds S."""
    if s["depth"] == 0:
        return None
    up = [p for p in chain["stretches"] if p["depth"] == s["depth"] - 1 and followed(p) and
          p["start_ns"] <= s["start_ns"] and end_of(s) <= end_of(p)]
    check(len(up) == 1, "stretch %r has %d parents in %r" % (s, len(up), chain))
    return up[0]


def path_of(chain, s):
    """The tids from the breached thread down to S's, one per depth."""
    tids = []
    while s is not None:
        tids.append(s["tid"])
        s = parent_of(chain, s)
    return tids[::-1]


def tile(stretches, start, end, what):
    """STRETCHES follow one another from START to END, with neither gap nor overlap."""
    at = start
    for s in sorted(stretches, key=lambda s: s["start_ns"]):
        check(s["start_ns"] == at, "%s: a stretch begins at %d, the one before ended at %d: %r"
              % (what, s["start_ns"], at, stretches))
        at = end_of(s)
    check(at == end, "%s end at %d, not %d: %r" % (what, at, end, stretches))


def check_chain(c):
    """What any chain of C (a "chain" line) must be; returns its chain."""
    ch = c["chain"]
    st = ch["stretches"]
    check(st and not ch["truncated"], "an empty or truncated chain: %r" % ch)
    # The window holds the wait (--pre): it is cut only where a task on its chain was
    # blocked since before the window, or is unknown there.
    cut = [s for s in st if s.get("began_before_window") or s["stretch"] == "unknown"]
    check(ch["cut_by_window"] == bool(cut), "cut_by_window %r, stretches cut: %r"
          % (ch["cut_by_window"], cut))
    check(ch["start_ns"] == c["breach_start_ns"] and ch["end_ns"] == c["breach_end_ns"] and
          ch["duration_ns"] == ch["end_ns"] - ch["start_ns"],
          "the chain covers %d..%d, the breach %d..%d" % (
              ch["start_ns"], ch["end_ns"], c["breach_start_ns"], c["breach_end_ns"]))
    # The bound, then the stronger form: they follow one another.
    total = sum(s["duration_ns"] for s in leaves(ch))
    check(abs(total - ch["duration_ns"]) <= ch["duration_ns"] // 100,
          "leaves add up to %d of a %d ns wait: %r" % (total, ch["duration_ns"], ch))
    tile(leaves(ch), ch["start_ns"], ch["end_ns"], "the leaves")
    tile([s for s in st if s["depth"] == 0], ch["start_ns"], ch["end_ns"],
         "the breached thread's stretches")
    check(all(s["tid"] == c["tid"] for s in st if s["depth"] == 0),
          "depth 0 is not all the breached thread's: %r" % st)
    check(max(s["depth"] for s in st) <= ch["max_depth"], "deeper than asked: %r" % ch)
    for s in st:
        check(s["tid"] != 0 and s.get("behind", {}).get("tid") != 0 and
              s.get("waker", {}).get("tid") != 0, "the idle task named: %r" % s)
        path = path_of(ch, s)
        check(len(set(path)) == len(path), "a task twice on one path %r: %r" % (path, ch))
        if s["stretch"] != "blocked":
            check("stop" not in s and "waker" not in s and s["leaf"],
                  "a %s stretch with a waker or children: %r" % (s["stretch"], s))
            continue
        waker = s.get("waker", {}).get("tid")
        if followed(s):
            check(waker and waker not in path and "stop" not in s,
                  "followed a waker on the path %r: %r" % (path, s))
            kids = [k for k in st if k["depth"] == s["depth"] + 1 and
                    s["start_ns"] <= k["start_ns"] and end_of(k) <= end_of(s)]
            check(kids and all(k["tid"] == waker for k in kids),
                  "the children of %r are not all its waker's: %r" % (s, kids))
            tile(kids, s["start_ns"], end_of(s), "the waker's stretches under %r" % s)
        elif s.get("stop") == "cycle":
            check(waker in path, "a cycle stop at a waker %r not on the path %r: %r"
                  % (waker, path, s))
        elif s.get("stop") in ("unknown waker", "not woken"):
            check(not waker, "a %s stop with a waker: %r" % (s["stop"], s))
        elif s.get("stop") == "depth":
            check(s["depth"] == ch["max_depth"], "stopped for depth at %d of %d: %r"
                  % (s["depth"], ch["max_depth"], s))
    return ch


def chains_of(lines, tid):
    """TID's chain lines, but those the kernel's untraced switches left without a waker."""
    return chains_fully_traced([c for c in lines if c.get("type") == "chain" and
                                c["tid"] == tid], "the chains of %d" % tid)


def started(log, event, key="tid"):
    """KEY of the workload's first EVENT line so far, or None."""
    lines = [e for e in log if e["event"] == event]
    return lines[0][key] if lines else None


def run_until(args, enough, timeout_s=45):
    """`hybtrace run ARGS` (--json), its workload going on until the stop file exists
    (workload.h), made once ENOUGH(its JSON lines so far, the workload's log so far) holds
    or TIMEOUT_S passed: every breach is seen, but one that comes while two dumps are pending
    is not dumped (a loaded machine takes a second to build one), so the test waits for the
    chains it needs rather than running a fixed count of rounds. Returns the finished Run."""
    with tempfile.TemporaryDirectory() as tmp, Control(stop=True) as control:
        log = os.path.join(tmp, "workload.log")
        ht = Attached(["run"] + args, env=dict(control.env, HT_WORKLOAD_LOG=log))
        try:
            deadline = time.monotonic() + timeout_s
            while (ht.proc.poll() is None and time.monotonic() < deadline and
                   not enough(ht.json_lines(), whole_lines(log))):
                time.sleep(0.05)
            control.stop()
            ht.wait(60)
        finally:
            ht.close()
        return Run(ht.rc, ht.stdout(), ht.stderr(), read_log(log))


def at_depth(ch, depth, tid=None, stretch=None):
    return [s for s in ch["stretches"] if s["depth"] == depth and
            (tid is None or s["tid"] == tid) and (stretch is None or s["stretch"] == stretch)]


def the_blocked(ch, depth, what):
    """The one blocked stretch at DEPTH whose waker was followed."""
    b = [s for s in at_depth(ch, depth, stretch="blocked") if followed(s)]
    check(len(b) == 1, "%s: %d followed blocked stretches at depth %d: %r"
          % (what, len(b), depth, ch["stretches"]))
    return b[0]


def covers(stretches, a, b):
    """Whether the running and runnable STRETCHES hold all of [A, B]."""
    spans = sorted((s["start_ns"], end_of(s)) for s in stretches
                   if s["stretch"] in ("running", "runnable"))
    at = a
    for lo, hi in spans:
        if lo <= at < hi:
            at = hi
    return at >= b


def check_report_agrees(c):
    """`report --json` reads the same chain back from the dump."""
    wc = report_json(c["dump"]).get("wait_chain")
    key = ("tid", "depth", "stretch", "start_ns", "duration_ns", "leaf", "stop")
    check(wc and [[s.get(k) for k in key] for s in wc["stretches"]] ==
          [[s.get(k) for k in key] for s in c["chain"]["stretches"]],
          "the report's chain %r, the live one %r" % (wc, c["chain"]))


# ---- 1. a lock convoy ----

CONVOY_HOLD_MS = 4
# D's chains to wait for, and how many of them must be of waits as scripted.
CONVOY_CHAINS = 8
CONVOY_CHECKED = 3


def convoy_rounds(run):
    """Per turn of D after its first: the turns of the hand-offs it waited through, by the
    log: {"d": D's turn, "c2", "b2", "a2", "c1": the ones before it}, where each of these
    threads slept in its futex wait for that turn (was woken by the release before it; on a
    loaded machine a releaser may come to its wait late, after its next turn began)."""
    turns = {t["turn"]: t for t in run.events("turn")}
    out = []
    for k in sorted(turns):
        if turns[k]["holder"] != "cv_d" or k == 0:
            continue
        r = {"d": turns.get(k), "c2": turns.get(k - 1), "b2": turns.get(k - 2),
             "a2": turns.get(k - 3), "c1": turns.get(k - 4)}
        check(all(r.values()), "turns missing before %d: %r" % (k, sorted(turns)))
        check([r[n]["holder"] for n in ("c1", "a2", "b2", "c2")] ==
              ["cv_c", "cv_a", "cv_b", "cv_c"], "the script's order: %r" % r)
        if all(r[n]["slept"] for n in ("d", "c2", "b2", "a2")):
            out.append(r)
    return out


def check_handoff(ch, depth, mine, before, what):
    """At DEPTH, the stretches of MINE's holder alone (the turn it held the lock), which the
    release of BEFORE (the turn before) woke: its hold lies in its running and runnable
    stretches, and its one blocked stretch, in futex, reaches back to the wait's start and
    ends at that release's wake, between the release and its own taking of the lock.
    Returns that blocked stretch."""
    holder, waker = mine["holder_tid"], before["holder_tid"]
    st = at_depth(ch, depth)
    check(st and all(s["tid"] == holder for s in st),
          "%s: depth %d is not all %s's (%d): %r" % (what, depth, mine["holder"], holder, st))
    check(covers(st, mine["got_ns"], mine["release_ns"]),
          "%s: %s's hold %d..%d is not in its running and runnable stretches: %r"
          % (what, mine["holder"], mine["got_ns"], mine["release_ns"], st))
    blocked = [s for s in st if s["stretch"] == "blocked"]
    check(len(blocked) == 1, "%s: %d blocked stretches of %s at depth %d: %r"
          % (what, len(blocked), mine["holder"], depth, st))
    b = blocked[0]
    check(b.get("waker", {}).get("tid") == waker and b["woken_by"] == "task" and
          b["start_ns"] == ch["start_ns"] and b.get("syscall") == "futex",
          "%s: %s's wait, from the wait's start, ends in a futex wake by %s (%d): %r"
          % (what, mine["holder"], before["holder"], waker, b))
    check(before["release_ns"] - EDGE_NS <= end_of(b) <= mine["got_ns"] + EDGE_NS,
          "%s: %s's wait ends at %d, not between %s's release at %d and its hold at %d"
          % (what, mine["holder"], end_of(b), before["holder"], before["release_ns"],
             mine["got_ns"]))
    return b


@test
def a_lock_convoy_follows_each_hand_off_back_to_a_cycle():
    """Four threads hand one futex lock on in the order D, A, B, C, A, B, C: each of D's
    waits of six holds (24 ms at least; the others wait three, 12 ms) is a breach. Its waker
    is C, who took the lock from B, who took it from A, who took it from C: C's blocked
    stretch was followed to B, B's to A, and A's stops at C, already on the path (a cycle),
    reaching back to the wait's start. Each level's task and its wake's instant are the
    log's."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        def enough(lines, log):
            d = started(log, "cases_start", "d")
            return d and len(chains_of(lines, d)) >= CONVOY_CHAINS

        run = run_until(["--json", "--source", "none", "--off-cpu", "20ms", "--rq-delay", "off",
                         "--min-interval", "0ms", "--max-dumps", "100", "--chain-depth", "8",
                         "--output", out, "--no-children", "--", workload("chain_cases"),
                         "convoy", "0", str(CONVOY_HOLD_MS)], enough)
        check(run.rc == 0, run.describe())
        start = run.events("cases_start")
        check(start and run.events("cases_end"), "the workload did not run:\n" + run.describe())
        tids = {n: start[0][n] for n in "abcd"}
        rounds = convoy_rounds(run)
        lines = run.json_lines()
        d_chains = chains_of(lines, tids["d"])
        checked = 0
        for r in rounds:
            d = r["d"]
            what = "D's wait for turn %d" % d["turn"]

            def within(start, end):
                return d["asked_ns"] <= start and end <= d["got_ns"]

            mine = [c for c in d_chains if within(c["breach_start_ns"], c["breach_end_ns"])]
            check(len(mine) <= 1, "%s: %d chains: %r" % (what, len(mine), mine))
            # Not dumped (two dumps were pending), or D, preempted after its release, fell
            # asleep too late for a breach, or for the lock's first hand-off to A.
            if not mine or mine[0]["breach_start_ns"] >= r["c1"]["release_ns"]:
                continue
            c = mine[0]
            ch = check_chain(c)
            own = the_blocked(ch, 0, what)
            check(own["waker"]["tid"] == tids["c"] and own.get("syscall") == "futex" and
                  own["state"] == "S" and own["woken_by"] == "task",
                  "%s: D blocked in futex, woken by C %d: %r" % (what, tids["c"], own))
            check(r["c2"]["release_ns"] - EDGE_NS <= end_of(own) <= d["got_ns"] + EDGE_NS,
                  "%s: woken at %d, C released at %d, D held at %d"
                  % (what, end_of(own), r["c2"]["release_ns"], d["got_ns"]))
            c_b = check_handoff(ch, 1, r["c2"], r["b2"], what)
            b_b = check_handoff(ch, 2, r["b2"], r["a2"], what)
            a_b = check_handoff(ch, 3, r["a2"], r["c1"], what)
            check(followed(c_b) and followed(b_b),
                  "%s: C's and B's waits were followed: %r %r" % (what, c_b, b_b))
            check(a_b["stop"] == "cycle" and a_b["leaf"],
                  "%s: A's waker C is on the path: a cycle stop: %r" % (what, a_b))
            check(not at_depth(ch, 4), "%s: past the cycle: %r" % (what, ch["stretches"]))
            if not checked:
                check_report_agrees(c)
            checked += 1
        # A loaded machine may spoil a round (a releaser late to its next wait); most are as
        # the script says.
        check(checked >= CONVOY_CHECKED, "only %d of D's %d chains are of waits as scripted "
              "(%d of them):\n%s" % (checked, len(chains_of(lines, tids["d"])), len(rounds),
                                     run.describe()))
        # Whatever else breached (a wait a loaded machine stretched) holds to the rules too.
        for c in (c for c in lines if c.get("type") == "chain"):
            check_chain(c)


# ---- 2. a softirq on behalf of a task ----

PINGPONG_CHAINS = 10
PINGPONG_GAP_MS = 10


@test
def a_loopback_wakeup_is_followed_into_the_sending_task():
    """tcp_pingpong: the receiver waits in read for the reply, which the sender sends after
    a 10 ms sleep; loopback runs the receiver's net_rx softirq in the sender's send, and that
    softirq wakes the receiver. Its chain follows the sender (the task the softirq ran in):
    depth 1 is the sender's, running as it logged its send, and its sleep a timer ended,
    never a stop at "softirq". (The kernel may defer a softirq to ksoftirqd, which then
    names itself: followed all the same.)"""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        def enough(lines, log):
            receiver = started(log, "pingpong_start")
            return receiver and len(chains_of(lines, receiver)) >= PINGPONG_CHAINS

        run = run_until(["--json", "--source", "none", "--off-cpu", "5ms", "--rq-delay", "off",
                         "--min-interval", "0ms", "--max-dumps", "100", "--output", out,
                         "--no-children", "--", workload("tcp_pingpong"), "0",
                         str(PINGPONG_GAP_MS)], enough)
        check(run.rc == 0, run.describe())
        start, sends = run.events("pingpong_start"), run.events("send")
        check(start and sends and run.events("pingpong_end"),
              "workload log incomplete\n" + run.describe())
        receiver, sender = start[0]["tid"], sends[0]["tid"]
        chains = chains_of(run.json_lines(), receiver)
        rounds = []
        for send in sends:
            mine = [c for c in chains if c["breach_start_ns"] < send["ts_ns"] <
                    c["breach_end_ns"]]
            check(len(mine) <= 1, "%d chains around one send: %r" % (len(mine), mine))
            if mine:
                rounds.append((send, mine[0]))
        check(len(rounds) >= PINGPONG_CHAINS, "%d of the receiver's %d chains hold a send (%d "
              "sends)\n%s" % (len(rounds), len(chains), len(sends), run.describe()))
        for c in chains:
            check_chain(c)
        named = timed = 0
        for send, c in rounds:
            ch = check_chain(c)
            own = the_blocked(ch, 0, "the receiver's read")
            check(own["woken_by"] == "softirq" and "stop" not in own and
                  own.get("syscall") == "read",
                  "the receiver's read, woken by a softirq in a task, followed: %r" % own)
            waker = own["waker"]
            if waker["tid"] != sender:
                check(waker["comm"].startswith("ksoftirqd/"),
                      "woken by %r, want the sender %d or ksoftirqd" % (waker, sender))
                continue
            named += 1
            one = at_depth(ch, 1)
            check(one and all(s["tid"] == sender for s in one),
                  "depth 1 is not all the sender's: %r" % ch["stretches"])
            # It ran as it logged the send, which came right before the wakeup.
            check(send["ts_ns"] <= end_of(own) + EDGE_NS and [
                s for s in one if s["stretch"] == "running" and
                s["start_ns"] - EDGE_NS <= send["ts_ns"] <= end_of(s) + EDGE_NS],
                  "the sender did not run at its send (%d): %r" % (send["ts_ns"], one))
            sleeps = [s for s in one if s["stretch"] == "blocked" and
                      s.get("syscall") == "clock_nanosleep"]
            # A wakeup the kernel did not trace is said so (a loop run: the timer fired while
            # the hypervisor agent's thread held the sender's CPU); the others, the timer's.
            sleeps = [s for s in sleeps if s.get("stop") != "wakeup not recorded"]
            for s in sleeps:
                check(s.get("woken_by") == "timer" and s.get("stop") == "timer" and s["leaf"]
                      and end_of(s) <= send["ts_ns"] + EDGE_NS,
                      "the sender's sleep, ended by its timer before the send at %d: %r in %r"
                      % (send["ts_ns"], s, c))
            timed += bool(sleeps)
        check(named >= len(rounds) * 3 // 4, "%d of %d waits woken by the sender's softirq: %r"
              % (named, len(rounds), [c["chain"]["stretches"][0] for _, c in rounds]))
        check(timed >= named * 3 // 4, "the sender's sleep is in %d of %d chains: %r"
              % (timed, named, [c["chain"] for _, c in rounds]))


# ---- 3. a waker woken by a timer on an idle CPU ----

IDLE_CHAINS = 5
IDLE_SLEEP_MS = 15


def paired(run, start, end):
    return list(zip(run.events(start), run.events(end)))


def check_timer_sleep(ch, depth, tid, sleep, sleep_ns, what):
    """TID's sleep (the log's start and end lines) at DEPTH: one blocked stretch in
    clock_nanosleep, within the logged bounds and as long as asked, that its timer ended:
    the walk stops there, and goes on back through TID itself: its stretches cover its
    part of the wait."""
    a, b = sleep[0]["ts_ns"], sleep[1]["ts_ns"]
    st = [s for s in at_depth(ch, depth, tid, "blocked") if s.get("syscall") ==
          "clock_nanosleep" and a - EDGE_NS <= s["start_ns"] and end_of(s) <= b + EDGE_NS]
    check(len(st) == 1, "%s: %d blocked stretches of %d in clock_nanosleep within its "
          "logged sleep %d..%d: %r" % (what, len(st), tid, a, b, ch["stretches"]))
    s = st[0]
    check(s["duration_ns"] >= sleep_ns - EDGE_NS, "%s: slept %d ns of %d: %r"
          % (what, s["duration_ns"], sleep_ns, s))
    check(s.get("stop") in ("timer", "irq") and s.get("woken_by") == s["stop"] and s["leaf"]
          and s["state"] == "S", "%s: the sleep's stop: %r" % (what, s))
    # Before its sleep and after it, the same task, down to the level's first instant.
    check([x for x in at_depth(ch, depth) if end_of(x) <= s["start_ns"]] and
          [x for x in at_depth(ch, depth) if x["start_ns"] >= end_of(s)],
          "%s: the walk did not go on through %d: %r" % (what, tid, ch["stretches"]))
    return s


@test
def a_timer_on_an_idle_cpu_ends_the_branch_and_the_chain_adds_up():
    """chain_cases idle: the waker, alone on CPU 1, waits until the target sleeps in read,
    then sleeps 15 ms itself, a timer that fires on that otherwise idle CPU, and writes the
    target a byte. The target's chain: its waker, whose sleep is one stretch as long as its
    log says, stopped at "timer" (or "irq"), not at an unknown waker, nor followed into the
    idle task; the walk goes on back through the waker, and the chain adds up."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        def enough(lines, log):
            target = started(log, "cases_start", "target")
            return target and len(chains_of(lines, target)) >= IDLE_CHAINS

        run = run_until(["--json", "--source", "none", "--off-cpu", "10ms",
                         "--off-cpu-syscalls", "read", "--rq-delay", "off",
                         "--min-interval", "0ms", "--max-dumps", "100", "--output", out,
                         "--no-children", "--", workload("chain_cases"), "idle", "0",
                         str(IDLE_SLEEP_MS)], enough)
        check(run.rc == 0, run.describe())
        start = run.events("cases_start")
        sleeps = paired(run, "waker_sleep_start", "waker_sleep_end")
        waits = paired(run, "target_wait_start", "target_wait_end")
        check(start and sleeps and len(sleeps) == len(waits) and run.events("cases_end"),
              "the workload did not run:\n" + run.describe())
        target, waker = start[0]["target"], sleeps[0][0]["tid"]
        chains = chains_of(run.json_lines(), target)
        checked = 0
        for sleep, wait in zip(sleeps, waits):
            what = "round %d" % wait[0]["round"]
            mine = [c for c in chains if wait[0]["ts_ns"] <= c["breach_start_ns"] and
                    c["breach_end_ns"] <= wait[1]["ts_ns"]]
            check(len(mine) <= 1, "%s: %d chains of the target's wait: %r"
                  % (what, len(mine), mine))
            if not mine:
                continue  # not dumped: two dumps were pending
            checked += 1
            ch = check_chain(mine[0])
            own = the_blocked(ch, 0, what)
            check(own["waker"]["tid"] == waker and own.get("syscall") == "read" and
                  own["woken_by"] == "task",
                  "%s: the target read, woken by the waker %d: %r" % (what, waker, own))
            check(end_of(own) >= sleep[1]["ts_ns"] - EDGE_NS,
                  "%s: woken at %d, before its waker's sleep ended at %d"
                  % (what, end_of(own), sleep[1]["ts_ns"]))
            one = at_depth(ch, 1)
            check(all(s["tid"] == waker for s in one), "%s: depth 1 is not all the waker's: %r"
                  % (what, one))
            check_timer_sleep(ch, 1, waker, sleep, IDLE_SLEEP_MS * 1_000_000, what)
            check(not at_depth(ch, 2), "%s: a level below the waker's timer: %r"
                  % (what, ch["stretches"]))
        check(checked >= IDLE_CHAINS and checked == len(chains),
              "%d of the target's %d chains are of its %d logged waits:\n%s"
              % (checked, len(chains), len(waits), run.describe()))


# ---- 4. --all ----

SEM_CHAINS = 3
SEM_SLEEP_MS = 60


@test
def every_task_a_target_still_has_its_chain():
    """--all: every task on the machine is a target. Only semtimedop waits of 40 ms breach
    (--off-cpu-syscalls), so only chain_cases sem's victim, which waits 60 ms on a semaphore
    that a thread of its own posts when a byte from another process comes, written after a
    sleep. Each of its waits is a breach, and each dumped has its chain: the poster (its
    read, within the window: --pre 300ms), then that process, whose timer ended the branch;
    the chain adds up."""
    need_root()
    with tempfile.TemporaryDirectory() as tmp, Control(stop=True) as control:
        out, log = os.path.join(tmp, "out"), os.path.join(tmp, "log")
        os.mkdir(out)
        ht = Attached(["--all", "--json", "--source", "none", "--off-cpu", "40ms",
                       "--off-cpu-syscalls", "semtimedop", "--rq-delay", "off",
                       "--min-interval", "0ms", "--max-dumps", "100", "--pre", "300ms",
                       "--duration", "120s", "--output", out])
        w = None
        try:
            attached = ht.wait_attached()
            w = subprocess.Popen([workload("chain_cases"), "sem", "0", str(SEM_SLEEP_MS)],
                                 env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
            # Until enough of its waits are dumped (a loaded machine builds one in a second).
            deadline = time.monotonic() + 45
            while w.poll() is None and time.monotonic() < deadline:
                victim = started(whole_lines(log), "cases_start", "victim")
                if victim and len(chains_of(ht.json_lines(), victim)) >= SEM_CHAINS:
                    break
                time.sleep(0.05)
            control.stop()
            rc = w.wait(60)
            events = read_log(log)
            start = [e for e in events if e["event"] == "cases_start"]
            check(rc == 0 and start and [e for e in events if e["event"] == "cases_end"],
                  "the workload failed (%d): %r" % (rc, events))
            victim = start[0]["victim"]
            waits = [e for e in events if e["event"] == "victim_wait_end"]
            # Every wait breached: its breach comes before the stop, and its dump with it.
            wait_for(lambda: len([b for b in ht.breaches() if b["tid"] == victim]) >=
                     len(waits), 30, "the victim's %d breaches\n%s" % (len(waits),
                                                                      ht.describe()))
            ht.stop()
        finally:
            if w and w.poll() is None:
                w.kill()
                w.wait()
            ht.close()
    check(ht.rc == 0, ht.describe())
    check(attached.get("targets", {}).get("all") is True, "attached: %r" % attached)

    def ev(name):
        return [e for e in events if e["event"] == name]

    posts, timer = ev("post"), start[0]["timer"]
    sleeps = list(zip(ev("timer_sleep_start"), ev("timer_sleep_end")))
    waits = list(zip(ev("victim_wait_start"), ev("victim_wait_end")))
    check(waits and len(sleeps) == len(waits) == len(posts), "log: %r" % events)
    poster = posts[0]["tid"]
    # (Whatever else on the machine waits in semtimedop may breach too.)
    breaches = [b for b in ht.breaches() if b["tid"] == victim]
    check(len(breaches) == len(waits), "%d waits of the victim %d, its breaches: %r"
          % (len(waits), victim, breaches))
    chains = chains_of(ht.json_lines(), victim)
    checked = 0
    for sleep, wait, post in zip(sleeps, waits, posts):
        what = "round %d" % wait[0]["round"]
        mine = [c for c in chains if wait[0]["ts_ns"] <= c["breach_start_ns"] and
                c["breach_end_ns"] <= wait[1]["ts_ns"]]
        check(len(mine) <= 1, "%s: %d chains of the victim's wait: %r" % (what, len(mine),
                                                                          mine))
        if not mine:
            continue  # not dumped: two dumps were pending
        checked += 1
        ch = check_chain(mine[0])
        check(mine[0]["pid"] == victim, "%s: the chain's pid: %r" % (what, mine[0]))
        own = the_blocked(ch, 0, what)
        check(own["waker"]["tid"] == poster and own.get("syscall") == "semtimedop" and
              end_of(own) >= post["ts_ns"] - EDGE_NS,
              "%s: the victim's semtimedop, woken by the poster %d after it logged its post at "
              "%d: %r" % (what, poster, post["ts_ns"], own))
        p = the_blocked(ch, 1, what)
        check(p["tid"] == poster and p["waker"]["tid"] == timer and p.get("syscall") == "read"
              and not p.get("began_before_window")
              and sleep[1]["ts_ns"] - EDGE_NS <= end_of(p) <= post["ts_ns"] + EDGE_NS,
              "%s: the poster's read, woken by %d after its sleep (%d) and before the post "
              "(%d): %r" % (what, timer, sleep[1]["ts_ns"], post["ts_ns"], p))
        check(all(s["tid"] == timer for s in at_depth(ch, 2)),
              "%s: depth 2 is not all %d's: %r" % (what, timer, ch["stretches"]))
        check_timer_sleep(ch, 2, timer, sleep, SEM_SLEEP_MS * 1_000_000, what)
    check(checked >= SEM_CHAINS and checked == len(chains),
          "%d of the victim's %d chains are of its %d logged waits:\n%s"
          % (checked, len(chains), len(waits), ht.describe()))
    ours = [b for b in ht.breaches() if b["pid"] == ht.pid]
    check(not ours, "breaches of hybtrace itself: %r" % ours[:3])
