# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The kernel monitor, for real: breaches of each kind against workloads' ground truth."""
import glob
import os
import re
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Control, Failure, NoTool, Skip, check,
                     check_new_dumps, hybtrace, need_root, our_bpf_links, read_log,
                     report_json, test, tolerance_ns, tp_query, wait_for, workload)


def within(breach, lo_ns, hi_ns):
    """The breach's interval lies inside [lo, hi] give or take the load tolerance."""
    tol = tolerance_ns(breach["duration_ns"])
    return breach["start_ns"] >= lo_ns - tol and breach["end_ns"] <= hi_ns + tol


def judged(run):
    """Which path judged the intervals (the summary's counters of the kernel programs)."""
    s = run.summary()
    check(s and "judged" in s, "no judged counters in the summary\n" + run.describe())
    return s["judged"]


def rq_delay_scenario(extra_args, env=None):
    run = hybtrace(["run", "--json", "--rq-delay", "500us"] + extra_args +
                   ["--no-children", "--", workload("rq_contention"), "0", "2000"], timeout=60, env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    start = run.events("contention_start")
    end = run.events("contention_end")
    check(start and end, "workload did not log its bounds\n" + run.describe())
    hog = start[0]["hog_pid"]
    victim = start[0]["tid"]
    # The victim runs as it logs each bound, so a wait of its own is either wholly between
    # them or not the scenario's: ended before the start (exec's migration), or begun after
    # the end (on its way out, behind other tasks of a loaded machine).
    breaches = [b for b in run.breaches("rq-delay")
                if b["tid"] == victim and b["end_ns"] > start[0]["ts_ns"] and
                b["start_ns"] < end[0]["ts_ns"]]
    check(len(breaches) >= 10, "%d rq-delay breaches of the victim, want >= 10\n%s"
          % (len(breaches), run.describe()))
    named = 0
    for b in breaches:
        check(b["duration_ns"] >= 500_000, "breach under the threshold: %r" % b)
        check(within(b, start[0]["ts_ns"], end[0]["ts_ns"]),
              "breach outside the contention window: %r" % b)
        # Every nanosecond of the wait is charged to a task, to an idle CPU or marked unknown.
        charged = sum(c["ns"] for c in b["ran_instead"]) + b["ran_instead_other_ns"]
        check(abs(charged + b["ran_instead_unknown_ns"] + b["ran_instead_idle_ns"]
                  - b["duration_ns"]) <= 10,
              "culprit times do not add up to the wait: %r" % b)
        # What cannot be charged is clock noise: a few us, never a share of the wait.
        check(b["ran_instead_unknown_ns"] <= max(10_000, b["duration_ns"] // 100),
              "unaccounted wait: %r" % b)
        if (hog, "rq_hog") in [(c["pid"], c["comm"]) for c in b["ran_instead"]]:
            named += 1
    # On a busy machine other CPU-bound tasks share the victim's CPU with the hog, and some
    # waits are spent behind them alone (seen: 85% of the waits named the hog at a load of
    # 10 on 2 CPUs): the hog must be in most of them.
    check(named >= 10 and named >= len(breaches) * 0.5,
          "the hog %d was named in %d of %d breaches" % (hog, named, len(breaches)))
    # The kernel's own count of the victim's run-queue time (sched_info.run_delay) over the
    # window: the breaches must hold nearly all of it (the victim never sleeps: it waits a
    # slice at a time, well over the threshold), and no more than the window's waits, give
    # or take the one that straddles each bound.
    truth_ns = end[0]["run_delay_ns"] - start[0]["run_delay_ns"]
    check(truth_ns > 0, "no run-queue time in /proc/thread-self/schedstat (CONFIG_SCHED_INFO)")
    total_ns = sum(b["duration_ns"] for b in breaches)
    largest_ns = max(b["duration_ns"] for b in breaches)
    check(0.9 * truth_ns <= total_ns <= truth_ns + 2 * largest_ns + tolerance_ns(truth_ns) // 10,
          "breaches add up to %.1f ms of waiting, the kernel counted %.1f ms"
          % (total_ns / 1e6, truth_ns / 1e6))
    return run, breaches, total_ns / truth_ns


@test
def rq_delay_names_the_hog():
    need_root()
    run, breaches, _ = rq_delay_scenario([])
    j = judged(run)
    # Only a switch the kernel made untraced (made up at its switch-out, when last_queued is
    # gone) is timed by the thread's own state here.
    check(j["rq_sched_info"] >= len(breaches) and
          j["rq_thread_state"] <= j["untraced_switch_in"],
          "run-queue waits were not timed by sched_info: %r" % j)


@test
def rq_delay_from_task_storage_agrees():
    need_root()
    # Kernels without CONFIG_SCHED_INFO time run-queue waits in the thread's own state.
    run, breaches, share = rq_delay_scenario([], env={"HYBTRACE_RQ_FROM_STORAGE": "1"})
    j = judged(run)
    check(j["rq_thread_state"] >= len(breaches) and j["rq_sched_info"] == 0,
          "the fallback did not time the run-queue waits: %r" % j)
    # The default path on the same scenario: both hold the same share of the kernel's count.
    run, _, default_share = rq_delay_scenario([])
    check(abs(share - default_share) <= 0.05,
          "the breaches hold %.1f%% of the kernel's run-queue time, %.1f%% by default"
          % (share * 100, default_share * 100))


@test
def rq_delay_pre_5_18_path_agrees():
    need_root()
    # The forced task_struct path must load and give the same kind of answers.
    rq_delay_scenario(["--prev-state", "task"])


# One thread slot for the whole target: every thread but one keeps its state in task storage.
SHARED_SLOTS = {"HYBTRACE_TEST_THREAD_SLOTS": "1"}


def off_cpu_scenario(how, extra_args, env=None, mode=()):
    run = hybtrace(["run", "--json", "--off-cpu", "10ms"] + extra_args +
                   ["--", workload("offcpu_wake"), how, "20", "2"] + list(mode), timeout=60,
                   env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    blocks = list(zip(run.events("block_start"), run.events("block_end"),
                      run.events("blocked_seen_asleep"), run.events("release")))
    check(len(blocks) == 2, "workload log incomplete\n" + run.describe())
    victim = blocks[0][0]["tid"]
    mine = [b for b in run.breaches("off-cpu") if b["tid"] == victim]
    breaches = []
    for start, end, asleep, release in blocks:
        # Under load the thread may also sleep elsewhere (pthread_join): match by bounds.
        b = [b for b in mine if within(b, start["ts_ns"], end["ts_ns"])]
        check(len(b) == 1, "want one off-cpu breach of tid %d in [%d, %d], got %d\n%s"
              % (victim, start["ts_ns"], end["ts_ns"], len(b), run.describe()))
        b = b[0]
        check(b["duration_ns"] >= 20_000_000, "off-cpu shorter than 20 ms: %r" % b)
        # It left the CPU after block_start and was back before block_end; it was asleep
        # when the releaser saw it so, and until the releaser woke it. Switch times are
        # estimated from the run queue's clock, good to a few us.
        slack_ns = 200_000
        check(start["ts_ns"] - slack_ns <= b["start_ns"] <= asleep["ts_ns"] + slack_ns and
              release["ts_ns"] - slack_ns <= b["end_ns"] <= end["ts_ns"] + slack_ns,
              "off-cpu [%d, %d] against the workload's block %d, asleep %d, release %d, "
              "back %d" % (b["start_ns"], b["end_ns"], start["ts_ns"], asleep["ts_ns"],
                           release["ts_ns"], end["ts_ns"]))
        waker = b["woken_by"]
        check(waker and waker["source"] == "task" and waker["tid"] == release["tid"]
              and waker["comm"] == "releaser",
              "woken by %r, want releaser %d" % (waker, release["tid"]))
        check(b["state"] == "S", "state %r, want S" % b["state"])
        breaches.append(b)
    return run, breaches


def same_answers(fallback, default):
    """Breaches of one scenario by two paths: the same answer for each round (durations are
    held to the workload's log by each scenario)."""
    check(len(fallback) == len(default), "%d breaches, by default %d"
          % (len(fallback), len(default)))
    for f, d in zip(fallback, default):
        for key in ("kind", "syscall", "syscall_ret", "kernel_stack"):
            check(f.get(key) == d.get(key), "%s %r, by default %r" % (key, f.get(key),
                                                                   d.get(key)))
        # What last woke a syscall is lost to a preemption after it, on either path.
        if f["kind"] != "off-cpu":
            continue
        waker = [(b["woken_by"] or {}).get(k) for b in (f, d) for k in ("source", "comm")]
        check(waker[:2] == waker[2:], "woken by %r, by default %r" % (f["woken_by"],
                                                                       d["woken_by"]))


@test
def off_cpu_futex_names_the_waker():
    need_root()
    _, breaches = off_cpu_scenario("futex", [])
    stack = " ".join(breaches[0]["kernel_stack"])
    check("futex" in stack, "kernel stack lacks futex: %s" % stack)


@test
def off_cpu_pipe_names_the_waker():
    need_root()
    _, breaches = off_cpu_scenario("pipe", [])
    stack = " ".join(breaches[0]["kernel_stack"])
    check("pipe_read" in stack or "vfs_read" in stack, "kernel stack lacks pipe read: %s" % stack)


@test
def off_cpu_with_shared_thread_slots_agrees():
    need_root()
    # The blocked thread is not the main one, which holds the only slot: its state is in
    # task storage, and so the off-CPU times are judged from there.
    run, breaches = off_cpu_scenario("futex", [], env=SHARED_SLOTS, mode=["thread"])
    j = judged(run)
    check(j["task_storage"] >= len(breaches), "the off-CPU times were not judged from task "
          "storage: %r" % j)
    run, default = off_cpu_scenario("futex", [], mode=["thread"])
    j = judged(run)
    check(j["task_storage"] == 0 and j["thread_slot"] >= len(default),
          "by default, every state is in a slot: %r" % j)
    same_answers(breaches, default)


@test
def off_cpu_pre_5_18_path_agrees():
    need_root()
    off_cpu_scenario("futex", ["--prev-state", "task"])


@test
def context_exits_are_attached_before_their_entries():
    need_root()
    # An entry seen without its exit would mark a CPU as in a timer for good, and blame
    # every wakeup there on it: the exits must be in place first (link ids say the order).
    target = subprocess.Popen(["sleep", "30"])
    ht = Attached(["--pid", str(target.pid), "--json", "--quiet"])
    try:
        ht.wait_attached()
        link_of = {l["prog_name"]: l["id"] for l in our_bpf_links()}
    finally:
        target.kill()
        target.wait()
        ht.close()
    for kind in ("irq", "softirq", "hrtimer", "timer"):
        entry, exit_ = link_of.get("handle_%s_entry" % kind), link_of.get("handle_%s_exit" % kind)
        check(entry and exit_, "%s programs not attached: %r" % (kind, sorted(link_of)))
        check(exit_ < entry, "%s exit attached after its entry (links %d, %d)"
              % (kind, exit_, entry))


def syscall_scenario(args, rounds=1, env=None):
    run = hybtrace(["run", "--json", "--syscall", "10ms"] + args, timeout=60, env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    sleeps = list(zip(run.events("sleep_start"), run.events("sleep_end")))
    check(len(sleeps) == rounds, "workload log incomplete\n" + run.describe())
    tid = sleeps[0][0]["tid"]
    mine = [b for b in run.breaches("syscall") if b["tid"] == tid]
    breaches = []
    for start, end in sleeps:
        b = [b for b in mine if within(b, start["ts_ns"], end["ts_ns"])]
        check(len(b) == 1, "want one syscall breach of tid %d in [%d, %d], got %d\n%s"
              % (tid, start["ts_ns"], end["ts_ns"], len(b), run.describe()))
        b = b[0]
        # Entry and exit are read on the workload's clock, between its two log lines.
        check(start["ts_ns"] <= b["start_ns"] and b["end_ns"] <= end["ts_ns"],
              "syscall [%d, %d] outside the workload's [%d, %d]"
              % (b["start_ns"], b["end_ns"], start["ts_ns"], end["ts_ns"]))
        check(b["syscall"] in ("clock_nanosleep", "nanosleep"), "syscall %r" % b["syscall"])
        check(b["duration_ns"] >= 15_000_000, "syscall shorter than 15 ms: %r" % b)
        check(b["syscall_ret"] == 0, "return value %r" % b["syscall_ret"])
        breaches.append(b)
    return run, breaches


@test
def syscall_sleep_breaches():
    need_root()
    syscall_scenario(["--", workload("sleeper"), "15", "2"], rounds=2)


@test
def syscall_filter_by_name():
    need_root()
    run = hybtrace(["run", "--json", "--syscall", "10ms", "--syscalls", "read,futex",
                    "--", workload("sleeper"), "15", "1"], timeout=60)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    check(not run.breaches("syscall"), "a filtered-out nanosleep breached\n" + run.describe())


# Rounds of wake_preempt: a few come to no preemption on a loaded machine.
WAKE_PREEMPT_ROUNDS = 20


@test
def syscall_waker_outlives_a_preemption_after_the_wakeup():
    """Issue 14 defect 2: a syscall breach's waker is the wakeup that ended its sleep, and a
    preemption after it is reported as such. The reader sleeps in read(timerfd) on CPU 1;
    the timer wakes it; faulting in the huge page it reads into, it is preempted by a
    SCHED_FIFO hog that wakes a little later on CPU 1 and spins 3 ms. The workload counts
    its own involuntary switches during each read (getrusage). On a loaded VM the hog now
    and then lands inside hardly any read of a whole run (the kernel counts an involuntary
    switch in fewer than 3): such a run tests too little of hybtrace, and the scenario is
    run again, up to three times in all."""
    need_root()
    try:
        with open("/sys/kernel/mm/transparent_hugepage/enabled") as f:
            thp = f.read()
    except OSError:
        thp = "[never]"
    if "[never]" in thp:
        raise Skip("needs transparent huge pages (madvise)")
    # A fragmented memory has no huge page to fault in: the read is then too short to be
    # preempted. Compacting first gives the workload one.
    try:
        with open("/proc/sys/vm/compact_memory", "w") as f:
            f.write("1")
    except OSError:
        pass
    for _ in range(3):
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "2ms", "--syscall",
                        "2ms", "--syscalls", "read", "--max-dumps", "0", "--no-children", "--",
                        workload("wake_preempt"), str(WAKE_PREEMPT_ROUNDS), "3"], timeout=60)
        check(run.rc == 0, "hybtrace failed\n" + run.describe())
        if sum(e["preempted"] > 0 for e in run.events("read_end")) >= 3:
            break
    reads = list(zip(run.events("read_start"), run.events("read_end")))
    hog = run.events("hog")
    check(len(reads) == WAKE_PREEMPT_ROUNDS and hog,
          "workload log incomplete\n" + run.describe())
    tid, hog = reads[0][0]["tid"], "fifo_hog[%d]" % hog[0]["hog_pid"]
    mine = [b for b in run.breaches("syscall") if b["tid"] == tid]
    preempted = by_hog = kernel_preempted = 0
    others, unwoken = [], []
    # A wakeup no program saw (one nested in another BPF program on its CPU is skipped by
    # the kernel, and counted; or the kernel's own hand-over without its tracepoints, whose
    # switch-in is made up at the switch-out, and counted) leaves a read without its waker:
    # only as many as counted.
    lost = run.summary()["lost"]
    unseen = lost["recursion"] + lost["unseen_switch_in"] + judged(run)["untraced_switch_in"]
    # A round whose read began less than the 2 ms threshold before its timer (the reader
    # ran late on a loaded machine) cannot sleep long enough to breach: it is no round.
    late = [s for s, e in reads if s["ts_ns"] > s["timer_ns"] - 2_000_000]
    check(len(late) <= WAKE_PREEMPT_ROUNDS // 6, "the reader was late for %d of %d rounds\n%s"
          % (len(late), len(reads), run.describe()))
    for start, end in reads:
        if start in late:
            continue
        b = [b for b in mine if within(b, start["ts_ns"], end["ts_ns"])]
        check(len(b) == 1, "want one syscall breach of tid %d in [%d, %d], got %d\n%s"
              % (tid, start["ts_ns"], end["ts_ns"], len(b), run.describe()))
        b = b[0]
        if not b["woken_by"] and len(unwoken) < unseen:
            unwoken.append(b)
            continue
        waker = b["woken_by"] or {}
        check(b["syscall"] == "read" and b["state"] == "S" and waker.get("source") == "timer",
              "read %.2fms state %s woken by %r, preempted %d times after it: want state S, "
              "woken by the timer" % (b["duration_ns"] / 1e6, b["state"], b["woken_by"],
                                      b["preemptions"]))
        # The timer's expiry, as the workload set it, is when the wakeup may come first
        # (the rq clock's estimate is within a millisecond); a loaded machine may deliver
        # it late, never after the read returned.
        check(start["timer_ns"] - 1_000_000 <= waker["at_ns"] <= end["ts_ns"],
              "woken at %d, the timer expired at %d, the read returned at %d"
              % (waker["at_ns"], start["timer_ns"], end["ts_ns"]))
        # No more preemptions than the kernel counted for the thread during the read.
        check(b["preemptions"] <= end["preempted"],
              "%d preemptions reported, the kernel counted %d involuntary switches"
              % (b["preemptions"], end["preempted"]))
        kernel_preempted += end["preempted"] > 0
        if b["preemptions"]:
            preempted += 1
            # The hog spins on CPU 1 for 3 ms from a little after the wakeup.
            held = sum(c["ns"] for c in b["ran_instead"]
                       if c["comm"] + "[%d]" % c["pid"] == hog)
            if held >= 1_500_000:
                by_hog += 1
            else:
                others.append(b["ran_instead"])
    check(len(unwoken) <= 1, "%d reads without their waker (lost %r)" % (len(unwoken), lost))
    # On a loaded machine the reader's wakeup may come after the hog's in some rounds, which
    # are then no preemption inside the read: the kernel's own count says which were.
    check(kernel_preempted >= 3, "the kernel counted a preemption in only %d of %d reads "
          "(calibrated: %r)\n%s" % (kernel_preempted, len(reads), run.events("calibrated"),
                                     run.describe()))
    check(preempted >= 0.75 * kernel_preempted, "%d reads reported preempted after their "
          "wakeup, the kernel counted %d\n%s" % (preempted, kernel_preempted, run.describe()))
    # Other tasks of a loaded machine take turns on CPU 1 too, and now and then preempt a
    # read first: the hog holds most of nearly every preempted read's runnable time.
    check(by_hog >= 0.75 * preempted, "%d of %d preempted reads had %s run instead for "
          "most of 3 ms; the others: %r" % (by_hog, preempted, hog, others))


def cpus_allowed(pid):
    """The CPUs each thread of PID may run on, as the kernel says: {tid: "0-1"}; {} once
    it exited."""
    out = {}
    try:
        tids = os.listdir("/proc/%d/task" % pid)
    except OSError:
        return out
    for tid in tids:
        try:
            with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
                out[int(tid)] = [l.split()[1] for l in f if l.startswith("Cpus_allowed_list:")][0]
        except (OSError, IndexError):
            pass
    return out


def exited(pid):
    """Whether PID is a zombie, or gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def cpu_list(text):
    cpus = set()
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return cpus


@test
def hybtrace_keeps_off_its_targets_cpu():
    """Issue 14 defect 2b: hybtrace's own reporting must not run instead of its target. The
    victim pins itself to CPU 0, where the hog spins; every wait there is a breach, and each
    wakes hybtrace. Once its first breach there after it pinned itself told hybtrace,
    hybtrace's threads may not run on CPU 0 (the kernel's word), none
    of them runs instead of the victim, and stderr says so once."""
    need_root()
    if 0 not in os.sched_getaffinity(0) or len(os.sched_getaffinity(0)) < 2:
        raise Skip("needs CPU 0 and another")
    with Control(start=True) as control, tempfile.TemporaryDirectory() as tmp:
        env = dict(control.env, HT_WORKLOAD_LOG=os.path.join(tmp, "workload.log"))
        h = Attached(["run", "--json", "--rq-delay", "500us", "--min-interval", "100ms",
                      "--no-children", "--", workload("rq_contention"), "0", "1500"], env=env)
        try:
            h.wait_attached()
            control.start()
            # Not proc.poll(): reaping it here would leave h.wait() nothing to wait for.
            wait_for(lambda: exited(h.pid) or all(
                0 not in cpu_list(c) for c in cpus_allowed(h.pid).values()),
                10, "hybtrace's threads to keep off CPU 0")
            allowed = cpus_allowed(h.pid)
            h.wait(60)
        finally:
            h.close()
        log = read_log(env["HT_WORKLOAD_LOG"])
    check(h.rc == 0, "hybtrace failed\n" + h.describe())
    check(len(allowed) >= 2 and all(cpu_list(c) == os.sched_getaffinity(0) - {0}
                                    for c in allowed.values()),
          "hybtrace's threads may run on %r, want all CPUs but 0" % allowed)
    said = [line for line in h.stderr().splitlines() if "off its target's CPU 0" in line]
    check(len(said) == 1, "want one line saying where hybtrace keeps, got %r" % said)
    start = [e for e in log if e["event"] == "contention_start"]
    end = [e for e in log if e["event"] == "contention_end"]
    pinned = [e for e in log if e["event"] == "pinned"]
    check(start and end and pinned, "workload log incomplete: %r" % log)
    start, end, pinned = start[0], end[0], pinned[0]
    breaches = sorted((b for b in h.breaches("rq-delay") if b["tid"] == start["tid"]
                       and b["end_ns"] > start["ts_ns"] and b["start_ns"] < end["ts_ns"]),
                      key=lambda b: b["start_ns"])
    there = [b for b in breaches if b["cpu"] == 0 and b["start_ns"] > pinned["ts_ns"]]
    check(len(there) >= 10, "%d waits of the victim on CPU 0\n%s" % (len(there), h.describe()))
    told_ns = there[0]["end_ns"] + 100_000_000
    later = [b for b in breaches if b["start_ns"] >= told_ns]
    # This hybtrace's threads, by their tids: another program called hybtrace on the machine
    # (a report being read) is not the tracer keeping off its target's CPU.
    ours = {int(tid) for tid in allowed}
    mine = [b for b in later if any(c["pid"] in ours for c in b["ran_instead"])]
    check(len(later) >= 10 and not mine, "hybtrace ran instead of its target in %d of %d "
          "waits after it knew its CPU: %r" % (len(mine), len(later),
                                               [b["ran_instead"] for b in mine][:3]))


def stalled_session(wrap=None):
    """rq_contention under hybtrace, whose event loop the test mode stalls 300 ms without CPU
    at the breach that tells it the victim's CPU, the builder raised meanwhile. The builder
    waits for work all through (no builds, no re-reads of the maps in the session's first
    2.5 s): the guard, which sleeps while it does, sees the stall only as the event loop's
    raise makes it watch. Returns the run's summary line."""
    with Control(start=True) as control:
        env = dict(control.env, HYBTRACE_TEST_LOOP_STALL_MS="300",
                   HYBTRACE_TEST_BUILDER_LATE_MS="2500")
        h = Attached(["run", "--json", "--rq-delay", "500us", "--min-interval", "100ms",
                      "--no-children", "--", workload("rq_contention"), "0", "800"], env=env,
                     wrap=wrap)
        try:
            h.wait_attached()
            control.start()
            h.wait(60)
        finally:
            h.close()
    check(h.rc == 0, "hybtrace failed\n" + h.describe())
    said = [line for line in h.stderr().splitlines() if "off its target's CPU 0" in line]
    check(said, "hybtrace never learnt the victim's CPU: no stall\n" + h.describe())
    summary = [j for j in h.json_lines() if j.get("type") == "summary"]
    check(summary, "no summary\n" + h.describe())
    return summary[-1]["dumps"]


@test
def a_stalled_event_loop_gives_the_builder_turns_at_sched_fifo_unless_niced():
    """The guard (builder_guard.h) ends a stall of the event loop on the dump builder: it
    raises the builder and, at each tick of the stall, gives it a turn at SCHED_FIFO, as any
    session does it, its capabilities dropped. Here the event loop sleeps 300 ms in its turn,
    the builder waiting for work but watched: one lift, a turn at each tick (about 12; at
    least 3 on a loaded machine). Run with `nice -n 5`, hybtrace was told to give way: the
    lift, no turns."""
    need_root()
    if 0 not in os.sched_getaffinity(0) or len(os.sched_getaffinity(0)) < 2:
        raise Skip("needs CPU 0 and another")
    plain = stalled_session()
    niced = stalled_session(wrap=["nice", "-n", "5"])
    check(plain["builder_lifts"] >= 1 and plain["builder_rushes"] >= 3,
          "stalled 300 ms: %d lifts, %d turns at SCHED_FIFO, want 1 and 3 or more"
          % (plain["builder_lifts"], plain["builder_rushes"]))
    check(niced["builder_lifts"] >= 1 and niced["builder_rushes"] == 0,
          "stalled 300 ms under nice 5: %d lifts, %d turns at SCHED_FIFO, want 1 and none"
          % (niced["builder_lifts"], niced["builder_rushes"]))
    return "%d lifts, %d turns; niced: %d lifts, %d turns" % (
        plain["builder_lifts"], plain["builder_rushes"], niced["builder_lifts"],
        niced["builder_rushes"])


def pingpong_scenario(out, hog=False, rps=False):
    """tcp_pingpong: the receiver waits in recv, 10 ms each round, for a reply the sender
    process sends over loopback, which runs the receiver's net_rx softirq in its send.
    Returns the run, the ground truth and, per round, the send and the receiver's off-CPU
    breach, asleep, that covers it (on a loaded machine the receiver may reach its recv
    after the reply came, or be preempted on its way there as the reply comes: that round
    has none)."""
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "1ms",
                    "--max-dumps", "1", "--output", out, "--no-children", "--",
                    workload("tcp_pingpong"), "20", "10"] + (["hog"] if hog else [])
                   + (["rps"] if rps else []),
                   timeout=60)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    start = run.events("pingpong_start")
    sends = run.events("send")
    check(start and len(sends) == 20, "workload log incomplete\n" + run.describe())
    receiver, sender = start[0]["tid"], sends[0]["tid"]
    mine = [b for b in run.breaches("off-cpu") if b["tid"] == receiver and b["state"] == "S"]
    rounds = []
    for send in sends:
        b = [b for b in mine if b["start_ns"] < send["ts_ns"] < b["end_ns"]]
        check(len(b) <= 1, "%d off-cpu breaches of the receiver around one send: %r"
              % (len(b), b))
        if b:
            rounds.append((send, b[0]))
    check(len(rounds) >= 15, "only %d of 20 replies came while the receiver slept\n%s"
          % (len(rounds), run.describe()))
    return run, start[0], sender, rounds


@test
def loopback_wakeup_names_the_sending_task():
    """Issue 15 item 5: loopback TCP runs the receiver's net_rx softirq in the sender's
    send (local_bh_enable), and that softirq wakes the receiver: its breach names the
    softirq and the sender, in the live JSON and in the dump's report. The receiver's CPU
    is idle when it is woken on a quiet machine: the idle task is never what ran
    instead."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run, _, sender, rounds = pingpong_scenario(out)
        want = {"source": "softirq", "softirq": "net_rx", "tid": sender, "pid": sender,
                "comm": "pp_sender"}
        named = [b for _, b in rounds
                 if b["woken_by"] and {k: b["woken_by"].get(k) for k in want} == want]
        # The kernel defers a softirq to ksoftirqd when it has run too long: that thread
        # runs it then, and names itself. Never a timer, an irq or no one.
        for _, b in rounds:
            waker = b["woken_by"] or {}
            check(waker.get("source") == "softirq" and waker.get("softirq") == "net_rx"
                  and (waker.get("tid") == sender
                       or waker.get("comm", "").startswith("ksoftirqd/")),
                  "woken by %r, want softirq (net_rx) in pp_sender[%d]" % (waker, sender))
        check(len(named) >= len(rounds) * 0.8, "%d of %d waits woken by %r: %r"
              % (len(named), len(rounds), want, [b["woken_by"] for _, b in rounds]))
        # Where the receiver's CPU was idle when it was woken (a quiet machine: most
        # waits), that time is counted apart, never charged to the idle task.
        for b in run.breaches():
            check(all(c["pid"] != 0 for c in b["ran_instead"]),
                  "the idle task as what ran instead: %r" % b["ran_instead"])
            charged = sum(c["ns"] for c in b["ran_instead"]) + b["ran_instead_other_ns"]
            check(abs(charged + b["ran_instead_unknown_ns"] + b["ran_instead_idle_ns"]
                      - b["runnable_ns"]) <= 10,
                  "what ran instead does not add up to the time runnable: %r" % b)
        dumps = [os.path.join(out, f) for f in os.listdir(out)
                 if f.endswith(".perfetto-trace")]
        check(len(dumps) == 1, "dumps: %r" % dumps)
        r = report_json(dumps[0])
        live = [b for b in run.breaches() if (b["tid"], b["start_ns"], b["end_ns"])
                == (r.get("tid"), r.get("start_ns"), r.get("end_ns"))]
        check(live, "no live breach for the dump's %r" % r)
        waker = live[0]["woken_by"] or {}
        check(r["woken_by"] and waker.get("source") == "softirq" and all(
            r["woken_by"].get(k) == waker.get(k) for k in ("source", "softirq", "tid", "comm")),
              "the report's woken_by %r, the live one %r" % (r["woken_by"], waker))
        check(all(c["pid"] != 0 for c in r["ran_instead"]),
              "the report names the idle task: %r" % r["ran_instead"])
        text = subprocess.run([HYBTRACE, "report", dumps[0]], capture_output=True,
                              text=True, timeout=120).stdout
        if waker.get("tid") == sender:
            check("woken by softirq (net_rx) in pp_sender[%d]" % sender in text,
                  "the report's text does not name the sender:\n%s" % text)


RPS_CPUS = "/sys/class/net/lo/queues/rx-0/rps_cpus"


@test
def softirq_on_an_interrupt_exit_names_no_task():
    """Issue 15 item 5: a softirq run on a hardirq's way out runs on behalf of no task,
    whichever task the interrupt came upon. tcp_pingpong rps steers loopback packets to the
    receiver's CPU: the sender's send queues each there and raises that CPU's net_rx by an
    IPI, and net_rx runs on the IPI's exit, in pp_bystander, which spins on that CPU in
    user mode and in the kernel in turn (a softirq on the task's own stack, or on the irq
    stack). The receiver's wakeup names net_rx and no one, or the task that ran it in its
    own context (ksoftirqd where the kernel deferred it, a task's local_bh_enable on that
    CPU): never the bystander, which never disables bottom halves, nor the sender, on
    another CPU. Most name no one, but on PREEMPT_RT, where a hardirq's exit runs no
    softirq."""
    need_root()
    if not os.path.exists(RPS_CPUS):
        raise Skip("no receive packet steering here (CONFIG_RPS)")
    with open(RPS_CPUS) as f:
        saved = f.read()
    try:
        with tempfile.TemporaryDirectory() as out:
            run, start, sender, rounds = pingpong_scenario(out, rps=True)
            bystander = start["bystander_pid"]
            unnamed = 0
            for _, b in rounds:
                waker = b["woken_by"] or {}
                check(waker.get("source") == "softirq" and waker.get("softirq") == "net_rx"
                      and waker.get("tid") not in (bystander, sender),
                      "woken by %r, want softirq (net_rx) in no task (bystander %d, sender "
                      "%d): %r" % (waker, bystander, sender, b))
                unnamed += "tid" not in waker
            if "PREEMPT_RT" not in os.uname().version:
                check(unnamed >= len(rounds) * 0.5, "%d of %d waits woken on an interrupt's "
                      "exit: %r" % (unnamed, len(rounds), [b["woken_by"] for _, b in rounds]))
    finally:
        with open(RPS_CPUS, "w") as f:
            f.write(saved)


def overlap_ns(a0, a1, b0, b1):
    return max(0, min(a1, b1) - max(a0, b0))


@test
def off_cpu_ran_instead_is_its_run_queue_part():
    """Issue 15 item 5: what ran instead of an off-CPU wait is what held its CPU while it
    was runnable, from its wakeup to its switch-in. A SCHED_FIFO hog on the receiver's CPU
    spins from 2 ms before each reply to 3 ms after: it is named for the time it ran
    after the wakeup, never for the 2 ms it ran while the receiver slept."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run, start, sender, rounds = pingpong_scenario(out, hog=True)
        hog = start["hog_pid"]
        spins = list(zip(run.events("hog_start"), run.events("hog_end")))
        asleep = behind = 0
        for send, b in rounds:
            # Every spin by the hog's own log (on a loaded machine a spin may begin after
            # the send it was meant to precede).
            wake_ns = (b["woken_by"] or {}).get("at_ns", b["start_ns"])
            held = sum(c["ns"] for c in b["ran_instead"] if c["pid"] == hog)
            after = sum(overlap_ns(s[0]["ts_ns"], s[1]["ts_ns"], wake_ns, b["end_ns"])
                        for s in spins)
            before = sum(overlap_ns(s[0]["ts_ns"], s[1]["ts_ns"], b["start_ns"], wake_ns)
                         for s in spins)
            # The workload's log and the switches are a few us apart: 300 us of margin.
            check(held <= after + 300_000 and b["runnable_ns"] <= b["end_ns"] - wake_ns + 10_000,
                  "ran instead %r, runnable %d ns; woken at %d, the hog spun %d ns after it "
                  "and %d ns before (while the receiver slept): want only the time after"
                  % (b["ran_instead"], b["runnable_ns"], wake_ns, after, before))
            check(all(c["pid"] != 0 for c in b["ran_instead"]),
                  "the idle task as what ran instead: %r" % b["ran_instead"])
            asleep += before >= 1_000_000
            behind += after >= 1_000_000 and held >= after // 2
        # The hog spun while the receiver slept, and it waited behind the hog after.
        check(asleep >= len(rounds) * 0.5 and behind >= len(rounds) * 0.5,
              "of %d waits, %d had the hog spin 1 ms while asleep and %d named it after: %r"
              % (len(rounds), asleep, behind, [b["ran_instead"] for _, b in rounds]))


def late_thread_scenario(env=None):
    run, breaches = syscall_scenario(["--off-cpu", "10ms", "--", workload("sleeper"), "15",
                                      "1", "late"], env=env)
    tid = breaches[0]["tid"]
    check(tid != breaches[0]["pid"], "the sleeper should be a new thread, not the main one")
    # Its sleeps breach both thresholds: one breach each, of both kinds.
    check(any(b["tid"] == tid and "off-cpu" in b["kinds"] for b in run.breaches()),
          "no off-cpu breach for the late thread\n" + run.describe())
    stack = " ".join(breaches[0]["kernel_stack"])
    check("nanosleep" in stack, "the syscall breach lacks the stack it slept on: %s" % stack)
    return run, breaches


@test
def thread_born_after_attach_is_followed():
    need_root()
    late_thread_scenario()


@test
def thread_born_after_attach_with_shared_thread_slots():
    need_root()
    # The main thread holds the only slot: the late thread lives in task storage.
    run, breaches = late_thread_scenario(env=SHARED_SLOTS)
    j = judged(run)
    check(j["task_storage"] >= len(breaches), "the late thread's syscall was not judged from "
          "task storage: %r" % j)
    run, default = late_thread_scenario()
    j = judged(run)
    check(j["task_storage"] == 0 and j["thread_slot"] >= len(default),
          "by default, every state is in a slot: %r" % j)
    same_answers(breaches, default)


def sleeps_reported(rounds, env, extra=()):
    """The late thread of `sleeper` sleeps 15 ms ROUNDS times under --off-cpu 10ms (and the
    options EXTRA): the run, its sleeps (start, end) and those no off-CPU breach of that
    thread covers."""
    run = hybtrace(["run", "--json", "--off-cpu", "10ms", "--max-dumps", "0"] + list(extra) +
                   ["--", workload("sleeper"), "15", str(rounds), "late"], env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    sleeps = list(zip(run.events("sleep_start"), run.events("sleep_end")))
    check(len(sleeps) == rounds, "workload log incomplete\n" + run.describe())
    tid = sleeps[0][0]["tid"]
    mine = [b for b in run.breaches("off-cpu") if b["tid"] == tid]
    unreported = [s for s, e in sleeps
                  if not any(within(b, s["ts_ns"], e["ts_ns"]) for b in mine)]
    return run, sleeps, unreported


# Skipped on purpose: one switch-in of a target thread in four, at random (every 4th fell in
# step with the sleeper's own switches under load: on 3 sleeps' ends of 60, once, not 15).
SKIP_SWITCH_INS = {"HYBTRACE_TEST_SKIP_SWITCH_IN": "4"}


@test
def unseen_switch_ins_are_counted_lost():
    need_root()
    # A switch-in that reached the program but was not judged (the test mode skips the
    # judgement, the switch itself is recorded, so it cannot be made up at the switch-out as
    # an untraced one is): the sleep it ended is either reported or counted lost, in both
    # paths.
    for name, env in (("default", {}), ("task storage", SHARED_SLOTS)):
        run, sleeps, unreported = sleeps_reported(60, dict(env, **SKIP_SWITCH_INS))
        lost = run.summary()["lost"]
        # A quarter of the sleeps' ends skipped, each at random: 15 of 60, 3 or fewer once in
        # 20000 runs.
        check(len(unreported) >= 4, "%s: the test mode left %d sleeps unreported\n%s"
              % (name, len(unreported), run.describe()))
        # Each unreported sleep is one unseen switch-in; the main thread's few waits (the
        # start file, its 200 ms sleep, the join) may add some.
        check(len(unreported) <= lost["unseen_switch_in"] <= len(unreported) + 4,
              "%s: %d sleeps unreported, %d unseen switch-ins counted\n%s"
              % (name, len(unreported), lost["unseen_switch_in"], run.describe()))
        check(lost["total"] >= lost["unseen_switch_in"], "%s: lost.total leaves out the "
              "unseen switch-ins: %r" % (name, lost))
        j = judged(run)
        check((j["task_storage"] > 0) == bool(env), "%s: judged %r" % (name, j))


# Test mode: every switch from another task to a target thread hidden from the monitor, as
# some kernels hide a few (untraced_switch_in() in bpf/monitor.bpf.c).
UNTRACED_SWITCHES = {"HYBTRACE_TEST_UNTRACED_SWITCH": "1"}


@test
def untraced_switches_still_end_their_waits():
    """Some kernels hand a CPU over without the sched_switch tracepoint: this machine's 6.18
    does it out of the hypervisor agent's thread, about 60 switches in 100k under load, and
    a wait that such a switch ended went unreported. The monitor sees the thread leave a CPU
    whose last traced switch took another task in, and makes its switch-in up from the
    kernel's sched_info.last_arrival. With every switch from another task to a target hidden,
    each sleep is still reported where the workload logged it, in the default path and the
    task-storage fallback, and a run-queue wait behind a known task names it, live and in
    the dump."""
    need_root()
    for name, env in (("default", {}), ("task storage", SHARED_SLOTS)):
        # Its syscall is the one noted as it fell asleep: a filter on it keeps each sleep.
        run, sleeps, unreported = sleeps_reported(40, dict(env, **UNTRACED_SWITCHES),
                                                  ["--off-cpu-syscalls", "clock_nanosleep"])
        check(not unreported, "%s: %d of %d sleeps unreported\n%s"
              % (name, len(unreported), len(sleeps), run.describe()))
        j, lost = judged(run), run.summary()["lost"]
        check(j["untraced_switch_in"] >= len(sleeps) and lost["unseen_switch_in"] == 0,
              "%s: %d switch-ins made up, %d unseen, for %d sleeps"
              % (name, j["untraced_switch_in"], lost["unseen_switch_in"], len(sleeps)))
        # Judged as the thread leaves the CPU again, maybe in another syscall (a convoy
        # thread's 200 us sleep, judged in its futex, was given the futex's kernel stack):
        # the stack it slept on is not known then, and is not made up; its syscall is the
        # one noted as it fell asleep.
        # Each says why it has no stack.
        told = [b for b in run.breaches("off-cpu") if b["tid"] == sleeps[0][0]["tid"]
                and (b.get("kernel_stack") or b.get("syscall") != "clock_nanosleep"
                     or "switch-in" not in b["not_traced"])]
        check(not told, "%s: a sleep judged at its next switch-out names a stack, or a "
              "syscall it did not sleep in, or says its switch-in was traced: %r"
              % (name, told[:1]))
    if os.cpu_count() < 2:
        return
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "10ms", "--output", out,
                        "--min-interval", "0ms", "--max-dumps", "8", "--no-children", "--",
                        workload("migrate_wait"), "150"], env=UNTRACED_SWITCHES)
        check(run.rc == 0, run.describe())
        migrate, migrated = run.events("migrate"), run.events("migrated")
        check(migrate and migrated, "workload log incomplete\n" + run.describe())
        hog = "fifo_hog"
        waits = [b for b in run.breaches("rq-delay") if b["tid"] == migrate[0]["tid"]
                 and b["end_ns"] > migrate[0]["ts_ns"]
                 and b["start_ns"] < migrated[0]["ts_ns"]]
        summary = run.summary()
        check(waits, "no wait across the migration; the workload's log %r; judged %r, lost %r, "
              "breaches %r\n%s" % (run.log, summary.get("judged"), summary.get("lost"),
                                   summary.get("breaches"), run.describe()))
        b = max(waits, key=lambda w: w["duration_ns"])
        check(b["ran_instead"] and b["ran_instead"][0]["comm"] == hog,
              "live, the %.2f ms wait: ran instead %r" % (b["duration_ns"] / 1e6,
                                                          b["ran_instead"]))
        reports = [r for r in map(report_json, [o["path"] for o in run.json_lines()
                                                if o.get("type") == "dump"])
                   if (r.get("tid"), r.get("start_ns"), r.get("end_ns")) ==
                   (b["tid"], b["start_ns"], b["end_ns"])]
        check(reports and reports[0]["ran_instead"] and
              reports[0]["ran_instead"][0]["comm"] == hog,
              "the dump of the %.2f ms wait: ran instead %r" % (
                  b["duration_ns"] / 1e6, reports and reports[0]["ran_instead"]))


@test
def a_move_noted_for_an_untraced_switch_in_is_not_read_later():
    """A run-queue wait moved to another CPU's queue begins where it began on the first: the
    move is noted and read at the next switch-in. Where the kernel takes the thread in without
    the tracepoint, that note went unread, and a later wait began at it (the kernel matrix:
    a 1.27 ms run-queue breach, 25 us of it runnable, the rest asleep in D). With that
    switch-in hidden (test mode), migrate_wait queued's wait, moved from behind one hog to
    behind another, is still reported, and no run-queue breach begun before the move
    reaches past the spin that follows that wait (over the thread's later sleeps). Six
    rounds: a preemption after the move replaces the note, and without the fix one round in
    four read it (three runs of six rounds out of three failed)."""
    need_root()
    if os.cpu_count() < 2:
        raise Skip("needs two CPUs")
    for _ in range(6):
        moved_wait_is_not_read_again()


def moved_wait_is_not_read_again():
    run = hybtrace(["run", "--json", "--rq-delay", "10ms", "--max-dumps", "0", "--no-children",
                    "--", workload("migrate_wait"), "60", "queued"],
                   env={"HYBTRACE_TEST_UNTRACED_AFTER_MIGRATION": "1"})
    check(run.rc == 0, run.describe())
    hogs, moved, waited = run.events("hogs"), run.events("moved"), run.events("waited")
    check(hogs and moved and waited and run.events("nap_end"),
          "workload log incomplete\n" + run.describe())
    tid = moved[0]["moved_tid"]
    mine = [b for b in run.breaches("rq-delay") if b["tid"] == tid]
    check([b for b in mine if b["start_ns"] < moved[0]["ts_ns"] < b["end_ns"]],
          "no wait across the move: %r\n%s" % (mine, run.describe()))
    check(judged(run)["untraced_switch_in"] >= 1, "no switch-in made up: %r" % judged(run))
    over = [b for b in mine if b["start_ns"] < moved[0]["ts_ns"] and
            b["end_ns"] > waited[0]["ts_ns"]]
    check(not over, "a run-queue wait from before the move, over the thread's later sleeps "
          "(the spin ended at %d): %r" % (waited[0]["ts_ns"], over))


# Test mode: every other wakeup of a target hidden from the monitor, as this machine's kernel
# hides one now and then with the untraced switch that follows it.
UNTRACED_WAKEUPS = {"HYBTRACE_TEST_UNTRACED_WAKEUP": "2"}


@test
def a_run_queue_wait_after_an_untraced_wakeup_names_no_waker():
    """A run-queue wait is judged from the kernel's sched_info before the thread's state is
    read: after a wakeup the monitor never saw, it named the wakeup of the sleep before
    (a demo dump's breach, beside stress-ng: woken 2 ms before its sleep began). A thread
    woken each round by a real-time thread on its CPU waits in the run queue for the
    waker's 2 ms hold, one wait per round. With every third wakeup of the process hidden
    (two a round, the waker's timer and the futex wake, so a third of the rounds' wakes),
    each wait names the wake that began it or none, saying why; some name none."""
    need_root()
    rounds = 30
    run = hybtrace(["run", "--json", "--rq-delay", "1ms", "--max-dumps", "0", "--no-children",
                    "--", workload("queued_after_wakeup"), str(rounds), "2", "3"],
                   env={"HYBTRACE_TEST_UNTRACED_WAKEUP": "3"})
    check(run.rc == 0, run.describe())
    wakes = run.events("round")
    check(len(wakes) == rounds, "workload log incomplete\n" + run.describe())
    waker = wakes[0]["waker_tid"]
    mine = [b for b in run.breaches("rq-delay") if b["comm"] == "queued"]
    # Each round's wait, alone: begun at its wake, ended when the queued thread ran.
    waits = [[b for b in mine if w["wake_ns"] - 1_000_000 <= b["start_ns"] <= w["ran_ns"]]
             for w in wakes]
    check(sum(1 for w in waits if len(w) == 1) >= rounds * 3 // 4,
          "%d of %d rounds have one run-queue breach\n%s"
          % (sum(1 for w in waits if len(w) == 1), rounds, run.describe()))
    stale = [b for b in mine if b["woken_by"] and
             not b["start_ns"] - 1_000_000 <= b["woken_by"]["at_ns"] <= b["end_ns"]]
    check(not stale, "a run-queue wait named a wakeup from before it: %r" % stale[:1])
    # The rounds' waits (not the pinning's, nor a preemption by a load's task: state R).
    waits = [b for w in waits for b in w if not b["state"].startswith("R")]
    named = [b for b in waits if b["woken_by"]]
    unnamed = [b for b in waits if not b["woken_by"]]
    unsaid = [b for b in unnamed if "wakeup" not in b["not_traced"]]
    check(all(b["woken_by"]["tid"] == waker for b in named),
          "a round's wait named another waker: %r" % named[:1])
    check(named and rounds // 6 <= len(unnamed) <= rounds // 2 and not unsaid
          and judged(run)["untraced_wakeup"] >= len(unnamed),
          "%d of %d run-queue waits name no waker, %d of them without saying why, %d counted"
          % (len(unnamed), len(waits), len(unsaid), judged(run)["untraced_wakeup"]))
    print("    %d rounds: %d waits, %d name no waker" % (rounds, len(waits), len(unnamed)))


@test
def a_sleep_whose_wakeup_went_untraced_names_no_waker():
    """A sleep whose wakeup the monitor never saw names no waker: not the one that ended an
    older sleep (a futex dump's breach named a wakeup 325 us before its sleep began). With
    every other wakeup of the target hidden, half the late thread's 15 ms sleeps say
    `woken_by` null and the rest a wakeup inside their sleep, in both paths."""
    need_root()
    for name, env in (("default", {}), ("task storage", SHARED_SLOTS)):
        run, sleeps, unreported = sleeps_reported(20, dict(env, **UNTRACED_WAKEUPS))
        check(not unreported, "%s: %d of %d sleeps unreported\n%s"
              % (name, len(unreported), len(sleeps), run.describe()))
        mine = [b for b in run.breaches("off-cpu") if b["tid"] == sleeps[0][0]["tid"]]
        stale = [b for b in mine if b["woken_by"]
                 and not b["off_cpu"]["start_ns"] <= b["woken_by"]["at_ns"] <= b["end_ns"]]
        check(not stale, "%s: a waker from outside the sleep: %r" % (name, stale[:1]))
        unnamed = sum(1 for b in mine if not b["woken_by"])
        # Each says why, and only those.
        said = [b for b in mine if (not b["woken_by"]) != ("wakeup" in b["not_traced"])]
        check(not said, "%s: a sleep's waker and its not_traced disagree: %r" % (name, said[:1]))
        check(len(mine) // 4 <= unnamed <= len(mine) * 3 // 4,
              "%s: %d of %d sleeps name no waker, with every other wakeup hidden"
              % (name, unnamed, len(mine)))
        # The main thread's few waits (its 200 ms sleep, the join, a page fault) may add some.
        counted = judged(run)["untraced_wakeup"]
        check(unnamed <= counted <= unnamed + 10, "%s: %d sleeps name no waker, %d counted"
              % (name, unnamed, counted))


@test
def a_dump_says_what_the_kernel_did_not_trace():
    """Every switch-in of the sleeper hidden and every other wakeup: each 15 ms sleep's dump
    says what of it the kernel did not trace, as its live line does, in the report and in
    the breach's arguments as Perfetto's importer reads them."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--off-cpu", "10ms", "--output", out,
                        "--min-interval", "0ms", "--max-dumps", "6", "--off-cpu-syscalls",
                        "clock_nanosleep", "--", workload("sleeper"), "15", "6", "late"],
                       env=dict(UNTRACED_SWITCHES, **UNTRACED_WAKEUPS))
        check(run.rc == 0, run.describe())
        sleeps = run.events("sleep_start")
        check(sleeps, "workload log incomplete\n" + run.describe())
        live = {(b["tid"], b["start_ns"], b["end_ns"]): b["not_traced"]
                for b in run.breaches("off-cpu") if b["tid"] == sleeps[0]["tid"]}
        said = {}
        for path in glob.glob(os.path.join(out, "*.perfetto-trace")):
            r = report_json(path)
            key = (r.get("tid"), r.get("start_ns"), r.get("end_ns"))
            if key not in live:
                continue
            said[key] = r["not_traced"]
            check(r["not_traced"] == live[key], "%s: report says %r not traced, live %r"
                  % (path, r["not_traced"], live[key]))
            try:
                rows = tp_query(path, "select a.string_value as v from slice s join args a "
                                "using (arg_set_id) where s.name = 'breach' and "
                                "a.key = 'debug.not_traced'")
            except NoTool:
                continue
            check(rows and all(row["v"].split(",") == live[key] for row in rows),
                  "%s: Perfetto reads not_traced %r, live %r" % (path, rows, live[key]))
        check(len(said) >= 3 and all("switch-in" in v for v in said.values())
              and any("wakeup" in v for v in said.values()),
              "dumps of the sleeps say %r; the live breaches %r" % (said, live))


@test
def a_syscall_whose_switch_in_went_untraced_is_one_breach_that_says_so():
    """A syscall's breach is sent at its exit, before the CPU's next traced switch shows
    that the kernel took the thread in without the tracepoint: a sleep whose wakeup and
    switch-in this machine's kernel did not trace (the kernel matrix beside stress-ng: a
    15.8 ms clock_nanosleep) came out as a syscall breach with no waker, no stack and
    nothing said, its off-CPU part judged later on its own. With every switch-in of the
    sleeper hidden and every other wakeup, each 15 ms sleep under --syscall 10ms --off-cpu
    10ms is one breach of both kinds that says its switch-in was not traced and names no
    stack, and that names the timer as its waker or says the wakeup was not traced. Its
    run-queue wait after a traced wakeup (--rq-delay 1us: each breaches), judged at the exit
    too, says so and names no stack either (it named the sys_exit tracepoint's own)."""
    need_root()
    run = hybtrace(["run", "--json", "--syscall", "10ms", "--off-cpu", "10ms", "--rq-delay",
                    "1us", "--max-dumps", "0", "--", workload("sleeper"), "15", "6", "late"],
                   env=dict(UNTRACED_SWITCHES, **UNTRACED_WAKEUPS))
    check(run.rc == 0, run.describe())
    sleeps = list(zip(run.events("sleep_start"), run.events("sleep_end")))
    check(len(sleeps) == 6, "workload log incomplete\n" + run.describe())
    tid = sleeps[0][0]["tid"]
    mine = [b for b in run.breaches() if b["tid"] == tid]
    queued = []
    for s, e in sleeps:
        covering = [b for b in mine if b["end_ns"] > s["ts_ns"] and b["start_ns"] < e["ts_ns"]]
        waits = [b for b in covering if b["kind"] != "rq-delay"]
        check(len(waits) == 1, "the sleep from %d to %d: want one breach of its sleep, got %r"
              % (s["ts_ns"], e["ts_ns"], covering))
        queued += [b for b in covering if b["kind"] == "rq-delay"]
        b = waits[0]
        kinds = sorted(k if isinstance(k, str) else k["kind"] for k in b["kinds"])
        check(b["kind"] == "syscall" and kinds == ["off-cpu", "syscall"] and
              within(b, s["ts_ns"], e["ts_ns"]),
              "the sleep from %d to %d: want one syscall breach of both kinds: %r"
              % (s["ts_ns"], e["ts_ns"], b))
        check("switch-in" in b["not_traced"] and not b["kernel_stack"],
              "a sleep whose switch-in was hidden: not traced %r, kernel stack %r"
              % (b["not_traced"], b["kernel_stack"]))
        waker = (b["woken_by"] or {}).get("source")
        check(waker == "timer" if "wakeup" not in b["not_traced"] else waker is None,
              "a sleep woken by %r says %r was not traced" % (b["woken_by"], b["not_traced"]))
    # Most runs have some: 1 to 3 idle, none in one of three runs beside stress-ng.
    told = [b for b in queued if "switch-in" not in b["not_traced"] or b["kernel_stack"]]
    check(not told, "%d run-queue waits after the sleeps; judged at the exit, these say their "
          "switch-in was traced or name a stack: %r" % (len(queued), told[:1]))
    print("    %d sleeps, %d run-queue waits after them judged at the exit"
          % (len(sleeps), len(queued)))


@test
def run_exits_with_the_commands_status():
    need_root()
    run = hybtrace(["run", "--quiet", "--", "sh", "-c", "exit 7"])
    check(run.rc == 7, "rc %d, want 7\n%s" % (run.rc, run.describe()))
    run = hybtrace(["run", "--quiet", "--", "/nonexistent/command"])
    check(run.rc == 127, "rc %d, want 127 for a missing command\n%s" % (run.rc, run.describe()))
    check(run.stderr.strip().count("\n") == 0 and "nonexistent" in run.stderr,
          "want one line naming the command:\n" + run.stderr)


@test
def pid_mode_follows_target_until_it_exits():
    need_root()
    with tempfile.TemporaryDirectory() as tmp, Control(start=True) as control:
        log = os.path.join(tmp, "log")
        env = dict(os.environ, HT_WORKLOAD_LOG=log, **control.env)
        target = subprocess.Popen([workload("offcpu_wake"), "futex", "20", "1"], env=env)
        ht = Attached(["--pid", str(target.pid), "--off-cpu", "10ms", "--json", "--output", tmp])
        try:
            # Its round begins once hybtrace watches, and it exits on its own after it.
            ht.wait_attached()
            control.start()
            rc = ht.wait(30)
        finally:
            target.kill()
            target.wait()
            ht.close()
        check(rc == 0, "rc %d when the target exited\n%s" % (rc, ht.describe()))
        events = read_log(log)
    start, end, release = ([e for e in events if e["event"] == name]
                           for name in ("block_start", "block_end", "release"))
    check(start and end and release, "workload did not run:\n%r" % events)
    # Other waits of the thread (its log file's first write) may breach too: the block's own.
    mine = [b for b in ht.breaches("off-cpu") if b["tid"] == start[0]["tid"] and
            within(b, start[0]["ts_ns"], end[0]["ts_ns"])]
    check(len(mine) == 1 and (mine[0]["woken_by"] or {}).get("tid") == release[0]["tid"],
          "no off-cpu breach of the block woken by the releaser:\n" + ht.describe())
    check(ht.summary(), "no summary at exit:\n" + ht.describe())


@test
def sigint_prints_summary_and_exits_zero():
    need_root()
    target = subprocess.Popen(["sleep", "30"])
    ht = Attached(["--pid", str(target.pid), "--output", tempfile.gettempdir()])
    try:
        # Text mode: hybtrace says it is watching on stderr.
        ht.wait_attached()
        rc = ht.stop()
    finally:
        target.kill()
        target.wait()
        ht.close()
    check(rc == 0, "rc %d after SIGINT\n%s" % (rc, ht.describe()))
    out = ht.stdout()
    check("run-queue delay" in out and "lost:" in out, "no summary/histogram:\n" + out)


def _json_lines_strictly(text, what):
    """Every line of TEXT parses as one JSON object, as `jq` reads the stream."""
    import json
    out = []
    for line in text.splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            raise Failure("%s: a line that is not JSON: %r" % (what, line))
    return out


@test
def run_json_on_stdout_is_json_alone():
    """`hybtrace run --json -- CMD | jq`: CMD's own stdout goes to stderr, as --help says."""
    need_root()
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([HYBTRACE, "run", "--json", "--quiet", "--output", tmp, "--",
                            "sh", "-c", "echo hello; echo to-stderr >&2; sleep 0.2"],
                           capture_output=True, text=True, timeout=60)
        check_new_dumps(["--output", tmp], tmp)
    check(p.returncode == 0, "rc %d\n%s" % (p.returncode, p.stderr))
    lines = _json_lines_strictly(p.stdout, "stdout of run --json")
    check(lines and lines[0].get("type") == "attached", "first line %r" % lines[:1])
    check(lines[-1].get("type") == "summary", "last line %r" % lines[-1:])
    check("hello" in p.stderr.splitlines() and "to-stderr" in p.stderr.splitlines(),
          "CMD's output is not on stderr:\n" + p.stderr)
    # --json=- is the same stream.
    with tempfile.TemporaryDirectory() as tmp:
        p = subprocess.run([HYBTRACE, "run", "--json=-", "--quiet", "--output", tmp, "--",
                            "sh", "-c", "echo hello"], capture_output=True, text=True,
                           timeout=60)
        check_new_dumps(["--output", tmp], tmp)
    check(p.returncode == 0, "rc %d\n%s" % (p.returncode, p.stderr))
    _json_lines_strictly(p.stdout, "stdout of run --json=-")
    check("hello" in p.stderr.splitlines(), "CMD's output is not on stderr:\n" + p.stderr)


@test
def run_json_to_a_file_leaves_stdout_to_the_command():
    need_root()
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        p = subprocess.run([HYBTRACE, "run", "--json=" + path, "--quiet", "--output", tmp,
                            "--", "sh", "-c", "echo hello; sleep 0.2"],
                           capture_output=True, text=True, timeout=60)
        check_new_dumps(["--output", tmp], tmp)
        check(p.returncode == 0, "rc %d\n%s" % (p.returncode, p.stderr))
        check(p.stdout == "hello\n", "stdout is not CMD's alone: %r" % p.stdout)
        with open(path) as f:
            lines = _json_lines_strictly(f.read(), path)
        check(os.stat(path).st_mode & 0o777 == 0o640, "mode %o" % os.stat(path).st_mode)
    check([l["type"] for l in lines][:1] == ["attached"] and lines[-1]["type"] == "summary",
          "types %r" % [l["type"] for l in lines])


@test
def run_names_the_target_by_its_command_before_exec():
    """Under run the child is CMD's from fork on, never "(hybtrace)": in the attached line, the
    announcement, the exit dump, and any breach (with a threshold of 1ns, the wakeup that
    releases the child is one, before its exec, unless its wait was too short to measure)."""
    need_root()
    with tempfile.TemporaryDirectory() as tmp:
        run = hybtrace(["run", "--json", "--quiet", "--rq-delay", "1ns", "--source", "none",
                        "--dump-on-exit", "--output", tmp, "--", "true"], timeout=60)
        check(run.rc == 0, run.describe())
        attached = [o for o in run.json_lines() if o.get("type") == "attached"]
        check(attached and attached[0]["comm"] == "true", "attached %r" % attached)
        pid = attached[0]["pid"]
        mine = [b for b in run.breaches() if b["pid"] == pid]
        check(all(b["comm"] == "true" for b in mine),
              "breaches named %r" % sorted(set(b["comm"] for b in mine)))
        dumps = [f for f in os.listdir(tmp) if f.endswith("-exit.perfetto-trace")]
        check(dumps, "no exit dump\n" + run.describe())
        report = subprocess.run([HYBTRACE, "report", os.path.join(tmp, dumps[0])],
                                capture_output=True, text=True, timeout=60)
        check("hybtrace" not in report.stdout.split("\n", 1)[0] and "(true)" in report.stdout,
              "the exit dump names the target:\n" + report.stdout[:500])
    # The text announcement too.
    p = subprocess.run([HYBTRACE, "run", "--source", "none", "--output", tempfile.gettempdir(),
                        "--", "true"], capture_output=True, text=True, timeout=60)
    check(re.search(r"watching pid \d+ \(true\)", p.stderr), "announce:\n" + p.stderr)


# The test mode keeps the held child waiting 60 ms more, asleep in its read, after attach.
HOLD_AFTER_ATTACH = {"HYBTRACE_TEST_HOLD_AFTER_ATTACH_MS": "60"}


@test
def run_does_not_report_its_own_hold_of_the_child():
    """Under run the child waits for hybtrace to attach before its exec. When that wait is
    seen whole (on a slow machine the child reaches it only after attach; the test mode
    makes it so), it is hybtrace's wait, not the command's: no breach, no dump, not in the
    summary's counts, while the command's own sleeps all breach."""
    need_root()
    with tempfile.TemporaryDirectory() as tmp:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "5ms", "--syscall",
                        "5ms", "--output", tmp, "--min-interval", "0ms", "--",
                        workload("sleeper"), "15", "3"], env=HOLD_AFTER_ATTACH)
        check(run.rc == 0, run.describe())
        sleeps = list(zip(run.events("sleep_start"), run.events("sleep_end")))
        check(len(sleeps) == 3, "workload log incomplete\n" + run.describe())
        tid = sleeps[0][0]["tid"]
        mine = [b for b in run.breaches() if b["tid"] == tid]
        # The held wait is 60 ms asleep; the command's own start (its execve, its loader's
        # syscalls) may breach on a loaded machine, and is the command's to report.
        before = [b for b in mine if b["start_ns"] < sleeps[0][0]["ts_ns"]
                  and b["duration_ns"] >= 40_000_000]
        check(not before, "the child's wait for attach was reported: %r" % before)
        for start, end in sleeps:
            check(any(within(b, start["ts_ns"], end["ts_ns"]) for b in mine),
                  "a 15 ms sleep was not reported\n" + run.describe())
        summary = run.summary()
        check(summary["detected"] == summary["reported"] == len(run.breaches()),
              "detected %d, reported %d, %d lines" % (summary["detected"], summary["reported"],
                                                      len(run.breaches())))
        check("never reached" not in run.stderr, run.stderr)
        check(len(os.listdir(tmp)) == len(mine), "dumps %r for %d breaches"
              % (os.listdir(tmp), len(mine)))


# A select() that a signal with a handler interrupts: the kernel returns -ERESTARTNOHAND
# (include/linux/errno.h, 514) at sys_exit, user space gets EINTR and Python retries it.
INTERRUPTED_SELECT = """
import select, signal
hits = []
signal.signal(signal.SIGALRM, lambda *a: hits.append(1))
signal.setitimer(signal.ITIMER_REAL, 0.05)
select.select([], [], [], 0.2)
assert hits, "the alarm did not interrupt select"
"""


@test
def syscall_return_names_the_kernels_errno():
    need_root()
    args = ["run", "--syscall", "20ms", "--syscalls", "select,pselect6", "--rq-delay", "off",
            "--max-dumps", "0", "--", "python3", "-c", INTERRUPTED_SELECT]
    run = hybtrace(args[:1] + ["--json"] + args[1:])
    check(run.rc == 0, run.describe())
    interrupted = [b for b in run.breaches("syscall") if b["syscall_ret"] == -514]
    check(interrupted, "no select breach returning -514\n" + run.describe())
    check(interrupted[0].get("syscall_ret_name") == "ERESTARTNOHAND",
          "syscall_ret_name %r" % interrupted[0].get("syscall_ret_name"))
    # The retried select times out and returns 0: no errno.
    done = [b for b in run.breaches("syscall") if b["syscall_ret"] == 0]
    check(not done or done[0].get("syscall_ret_name", 0) is None, "a 0 return named: %r" % done)
    run = hybtrace(args)
    check(run.rc == 0, run.describe())
    check(" = -514 (ERESTARTNOHAND: interrupted by a signal" in run.stdout,
          "the live line does not name -514\n" + run.describe())
