# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--block-stacks for real: the user stack where a thread blocked, with its breach, in the
JSON line, the dump (as Perfetto reads it) and the report; fp and DWARF; the hint."""
import glob
import json
import os
import subprocess
import sys
import tempfile

from harness import HYBTRACE, check, hybtrace, need_root, test, tp_query, workload

# What glibc 2.36 names the lock path (libc6-dbg's names, and the exported ones).
LOCK_WAIT = {"__lll_lock_wait", "__GI___lll_lock_wait"}
MUTEX_LOCK = {"pthread_mutex_lock", "___pthread_mutex_lock", "__pthread_mutex_lock",
              "__GI___pthread_mutex_lock"}


def convoy(binary, extra):
    """Four threads in a convoy on one mutex, each wait well above --off-cpu."""
    out = tempfile.mkdtemp()
    dumps = [] if "--max-dumps" in extra else ["--max-dumps", "2"]
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "6ms", "--block-stacks",
                    "--source", "none", "--output", out] + dumps + extra +
                   ["--", workload(binary), "5", "12", "4"], timeout=120)
    check(run.rc == 0, run.describe())
    # Without --syscall the breach names no syscall: its kernel stack says futex. With it,
    # a sleep in a futex that breaches both thresholds is one breach of both kinds.
    waits = [b for b in run.breaches() if "off-cpu" in b.get("kinds", [b["kind"]])
             and b["tid"] != b["pid"] and any("futex" in f for f in b.get("kernel_stack", []))]
    check(waits, "no off-CPU breach of a convoy thread in futex\n" + run.describe())
    return run, waits, out


def check_lock_stack(stack, what):
    """Innermost first: the lock's wait in libc, pthread_mutex_lock, take_convoy_lock (the
    function that called it), convoy_round, convoy_thread."""
    check(stack and stack[0] in LOCK_WAIT, "%s: innermost frame is not libc's lock wait: %r"
          % (what, stack))
    want = ["take_convoy_lock", "convoy_round", "convoy_thread"]
    check(all(w in stack for w in want), "%s: %r lacks one of %r" % (what, stack, want))
    at = [stack.index(w) for w in want]
    check(at == sorted(at) and at[0] >= 2 and stack[at[0] - 1] in MUTEX_LOCK,
          "%s: %r is not lock wait <- pthread_mutex_lock <- take_convoy_lock <- convoy_round "
          "<- convoy_thread" % (what, stack))


def blocked_instants(path):
    """(tid, ts, frames root first) of each 'blocked here' instant, as Perfetto read it."""
    out = []
    for r in tp_query(path, "select s.ts, t.tid, c.callsite_id from slice s "
                      "join thread_track tt on s.track_id = tt.id join thread t using (utid) "
                      "join __intrinsic_track_event_callstacks c on c.slice_id = s.id "
                      "where s.name = 'blocked here' and s.dur = 0"):
        frames = tp_query(path, "select c.depth, f.name from stack_profile_callsite c "
                          "join stack_profile_frame f on f.id = c.frame_id where c.id = %d "
                          "or c.id in (select id from experimental_ancestor_stack_profile_"
                          "callsite(%d)) order by c.depth" % (r["callsite_id"],
                                                               r["callsite_id"]))
        out.append((r["tid"], r["ts"], [f["name"] for f in frames]))
    return out


def report_json(path):
    p = subprocess.run([HYBTRACE, "report", "--json", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "report failed: %s" % p.stderr)
    return json.loads(p.stdout)


def check_dumps(run, out):
    """Each dump of an off-CPU breach with a stack shows that stack on its thread's track, at
    the breach's start, as Perfetto reads it; and the report names it."""
    by_start = {(b["tid"], b["start_ns"]): b for b in run.breaches("off-cpu")}
    seen = 0
    for path in glob.glob(os.path.join(out, "*-off-cpu.perfetto-trace")):
        rep = report_json(path)
        breach = by_start.get((rep["tid"], rep["start_ns"]))
        check(breach, "%s: no JSON breach of tid %s at %s" % (path, rep["tid"], rep["start_ns"]))
        if not breach.get("block_stack"):
            continue
        want = list(reversed(breach["block_stack"]))
        check(rep["user_stack_blocked"] == want, "%s: report's stack %r, the breach's %r"
              % (path, rep["user_stack_blocked"], want))
        instants = [i for i in blocked_instants(path) if i[0] == breach["tid"]]
        check(len(instants) == 1, "%s: %d 'blocked here' instants of tid %d"
              % (path, len(instants), breach["tid"]))
        check(instants[0][2] == want, "%s: Perfetto reads %r, the breach's stack is %r"
              % (path, instants[0][2], want))
        # At the breach's start: the off-CPU slice on the kernel track begins there too.
        starts = [r["ts"] for r in tp_query(path, "select ts from slice where name = 'breach' "
                                            "and dur > 0")]
        check(starts and instants[0][1] == starts[0], "%s: 'blocked here' at %d, breach at %r"
              % (path, instants[0][1], starts))
        seen += 1
    check(seen, "no dump of an off-CPU breach with its stack in %s\n%s"
          % (os.listdir(out), run.describe()))


@test
def block_stacks_hold_the_lock_and_its_caller_with_frame_pointers():
    need_root()
    run, waits, out = convoy("mutex_convoy", [])
    with_stack = [b for b in waits if b.get("block_stack")]
    # Each wait's stack was taken as it began: all of them have it.
    check(len(with_stack) == len(waits), "%d of %d futex waits have no block_stack\n%s"
          % (len(waits) - len(with_stack), len(waits), run.describe()))
    for b in with_stack:
        check_lock_stack(b["block_stack"], "tid %d at %d" % (b["tid"], b["start_ns"]))
    check_dumps(run, out)


@test
def block_stacks_unwind_with_dwarf_without_frame_pointers():
    need_root()
    run, waits, out = convoy("mutex_convoy_nofp", ["--callgraph", "dwarf"])
    for b in waits:
        check_lock_stack(b.get("block_stack"), "tid %d at %d" % (b["tid"], b["start_ns"]))
    check("try --callgraph dwarf" not in run.stderr, run.describe())
    check_dumps(run, out)


@test
def one_frame_deep_stacks_say_once_to_try_dwarf():
    need_root()
    run, waits, _ = convoy("mutex_convoy_nofp", [])
    # No frame pointer anywhere: the walk stops at libc's lock wait.
    check(all(b.get("block_stack") and len(b["block_stack"]) == 1 and
              b["block_stack"][0] in LOCK_WAIT for b in waits),
          "stacks of more than one frame without frame pointers: %r"
          % [b.get("block_stack") for b in waits])
    hints = [line for line in run.stderr.splitlines() if "try --callgraph dwarf" in line]
    check(len([h for h in hints if "libc.so.6" in h]) == 1,
          "not one hint for libc.so.6: %r\n%s" % (hints, run.describe()))
    check(len(hints) == len(set(hints)), "a hint said twice: %r" % hints)


@test
def no_block_stack_without_the_option():
    need_root()
    out = tempfile.mkdtemp()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "6ms", "--source", "none",
                    "--max-dumps", "0", "--output", out, "--", workload("mutex_convoy"),
                    "5", "4", "4"], timeout=120)
    check(run.rc == 0, run.describe())
    check(run.breaches("off-cpu"), "no off-CPU breach\n" + run.describe())
    check(not any("block_stack" in b for b in run.breaches()), run.describe())


def check_never_blocked(b, what):
    """A syscall breach that says it never blocked: no stack, no sleep, no off-CPU part."""
    check("block_stack" not in b and b["state"] == "R" and "off-cpu" not in b["kinds"],
          "%s: said never-blocked: %r" % (what, b))


@test
def syscall_breaches_carry_the_stack_where_the_syscall_slept():
    need_root()
    run, _, _ = convoy("mutex_convoy", ["--syscall", "6ms", "--syscalls", "futex",
                                        "--max-dumps", "0"])
    waits = [b for b in run.breaches("syscall") if b["tid"] != b["pid"]]
    check(waits, "no futex syscall breach of a convoy thread\n" + run.describe())
    # Each round's lock and unlock call, and the voluntary context switches the kernel
    # counted in it. The unlock's futex wake never sleeps, yet on a loaded VM it now and then
    # takes longer than 6 ms (the wakeup held up in the kernel, or the vCPU by its host):
    # a syscall breach with no place where it blocked, which must say so.
    calls = []
    for e in run.events("waited"):
        calls.append((e["tid"], "lock", e["lock_ns"], e["lock_sleeps"]))
        calls.append((e["tid"], "unlock", e["unlock_ns"], e["unlock_sleeps"]))
    with_stack = 0
    for b in waits:
        what = "syscall of tid %d at %d" % (b["tid"], b["start_ns"])
        inside = [c for c in calls if c[0] == b["tid"] and c[2][0] <= b["start_ns"] and
                  b["end_ns"] <= c[2][1]]
        check(inside, "%s is in no lock or unlock call the convoy logged: %r" % (what, b))
        _, call, _, sleeps = inside[0]
        if b.get("block_stack_missing") == "never-blocked":
            check_never_blocked(b, what)
            # A lock call may sleep in one futex and not in another: only a call the
            # kernel saw never sleep pins it down.
            check(call == "lock" or sleeps == 0, "%s: never-blocked, in an unlock the kernel "
                  "counted %d sleeps in" % (what, sleeps))
            continue
        # Every other one blocked, in a lock call the kernel counted a sleep in, and its
        # stack is the lock's.
        check(call == "lock" and sleeps > 0, "%s: no never-blocked, in a %s call that slept "
              "%d times: %r" % (what, call, sleeps, b))
        check_lock_stack(b.get("block_stack"), what)
        with_stack += 1
    check(with_stack, "no lock wait among %d syscall breaches" % len(waits))
    blocks = run.summary()["block_stacks"]
    check(blocks["lost"] == 0 and blocks["not_received"] == 0, "summary: %r" % blocks)


# A syscall that runs in the kernel for tens of ms without sleeping (getrandom of 64 MiB,
# a copy out of ChaCha20), with the kernel's count of the thread's voluntary switches around
# each call.
GETRANDOM = """
import json, os, resource, threading, time
log = open(os.environ["HT_WORKLOAD_LOG"], "a")
for _ in range(3):
    s0 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    t0 = time.monotonic_ns()
    os.getrandom(64 << 20)
    t1 = time.monotonic_ns()
    s1 = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
    log.write(json.dumps({"event": "getrandom", "tid": threading.get_native_id(),
                          "ns": [t0, t1], "sleeps": s1 - s0}) + "\\n")
    log.flush()
"""


@test
def a_syscall_that_never_blocked_says_so():
    need_root()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "5ms", "--syscall", "5ms",
                    "--syscalls", "getrandom", "--block-stacks", "--source", "none",
                    "--max-dumps", "0", "--", sys.executable, "-c", GETRANDOM], timeout=120)
    check(run.rc == 0, run.describe())
    calls = run.events("getrandom")
    check(len(calls) == 3, "the workload logged %r\n%s" % (calls, run.describe()))
    never = 0
    for c in calls:
        got = [b for b in run.breaches("syscall") if b["tid"] == c["tid"] and
               c["ns"][0] <= b["start_ns"] and b["end_ns"] <= c["ns"][1]]
        check(len(got) == 1, "getrandom %r: breaches %r\n%s" % (c, got, run.describe()))
        b = got[0]
        if c["sleeps"]:
            # It slept after all (a page fault waiting, say): then where it blocked.
            check("block_stack" in b and "block_stack_missing" not in b, "%r: %r" % (c, b))
            continue
        check(b.get("block_stack_missing") == "never-blocked", "getrandom %r, which the "
              "kernel saw never sleep, is not said never-blocked: %r" % (c, b))
        check_never_blocked(b, "getrandom at %d" % b["start_ns"])
        never += 1
    check(never, "every getrandom slept: %r" % calls)
    check(run.summary()["block_stacks"]["lost"] == 0, run.describe())


@test
def a_sleep_held_in_its_syscall_keeps_its_stack_past_a_later_sleep():
    """A receive sleeps 30 ms, then 2 ms, in one syscall under a 200 ms syscall threshold:
    the 30 ms sleep is held until the syscall ends and then sent alone, off-CPU. The 2 ms
    sleep kept its own stack meanwhile; the breach carries the 30 ms sleep's, shown in the
    dump where that sleep began.

    The workload exits right after the receive, often before hybtrace reads the breach:
    then the stack's frames may not be named (the symbolizer finds no mappings left, a
    defect of its own), but the stack is there, taken as the held sleep began, and the
    dump is checked when they are."""
    need_root()
    out = tempfile.mkdtemp()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms", "--syscall",
                    "200ms", "--block-stacks", "--source", "none", "--max-dumps", "1",
                    "--output", out, "--", workload("syscall_waits"), "sock", "30", "2"],
                   timeout=120)
    check(run.rc == 0, run.describe())
    start = run.events("wait_start")
    again = run.events("asleep_again")
    check(len(start) == 1 and len(again) == 1, "workload log %r" % run.log)
    waits = [b for b in run.breaches() if b["tid"] == start[0]["tid"]]
    check(len(waits) == 1 and waits[0]["kinds"] == ["off-cpu"], "breaches of the reader: %r\n%s"
          % (waits, run.describe()))
    b = waits[0]
    # The held sleep: it began before the second one, which the writer saw.
    check(b["end_ns"] < again[0]["ts_ns"], "breach %r, asleep again at %d" % (b, again[0]["ts_ns"]))
    check("block_stack" in b and "block_stack_missing" not in b,
          "the held sleep's breach has no stack: %r" % b)
    # Taken where the held sleep began (the same clock reading), not at the later sleep.
    check(b["block_stack_at_ns"] == b["off_cpu"]["start_ns"] == b["start_ns"],
          "the stack was taken at %d, the held sleep began at %d" % (b["block_stack_at_ns"],
                                                                    b["off_cpu"]["start_ns"]))
    if b["block_stack"]:
        check_dumps(run, out)


@test
def the_summary_counts_the_stacks_taken_as_the_kernel_counts_voluntary_switches():
    """make bench divides the sched_switch program's added time by the stacks taken: the
    count must be the kernel's. Each sleep of the sleeper is a voluntary switch-out, and it
    logs the kernel's own count (getrusage's nvcsw) around its sleeps."""
    need_root()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "1ms", "--block-stacks",
                    "--source", "none", "--max-dumps", "0", "--",
                    workload("sleeper"), "2", "150"], timeout=120)
    check(run.rc == 0, run.describe())
    starts, ends = run.events("sleep_start"), run.events("sleep_end")
    check(len(starts) == 150 and len(ends) == 150, "the sleeper logged %d sleeps, %d ends"
          % (len(starts), len(ends)))
    # The thread's voluntary switches from its first sleep to its last wakeup, all while
    # hybtrace watched (run starts it attached), and all it made since its birth.
    between = ends[-1]["nvcsw"] - starts[0]["nvcsw"]
    since_birth = ends[-1]["nvcsw"]
    check(between >= 150, "the kernel counted %d voluntary switches in 150 sleeps" % between)
    blocks = run.summary().get("block_stacks")
    check(blocks, "no block_stacks in the summary\n" + run.describe())
    lost = run.summary()["lost"]
    missed = blocks["lost"] + lost["recursion"] + lost["unseen_switch_in"]
    check(between - missed <= blocks["taken"] <= since_birth + 2,
          "%d stacks taken; the kernel counted %d voluntary switches between the first sleep "
          "and the last wakeup, %d since the thread began (%d missed)\n%s"
          % (blocks["taken"], between, since_birth, missed, run.describe()))
    check(0 < blocks["shown"] <= min(blocks["taken"], len(run.breaches())),
          "%r, %d breaches" % (blocks, len(run.breaches())))
