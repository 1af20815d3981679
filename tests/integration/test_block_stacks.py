# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""--block-stacks for real: the user stack where a thread blocked, with its breach, in the
JSON line, the dump (as Perfetto reads it) and the report; fp and DWARF; the hint."""
import glob
import json
import os
import subprocess
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


@test
def syscall_breaches_carry_the_stack_where_the_syscall_slept():
    need_root()
    run, _, _ = convoy("mutex_convoy", ["--syscall", "6ms", "--syscalls", "futex",
                                        "--max-dumps", "0"])
    waits = [b for b in run.breaches("syscall") if b["tid"] != b["pid"]]
    check(waits, "no futex syscall breach of a convoy thread\n" + run.describe())
    # Known defect (issue 15, item 4): now and then one syscall breach of the convoy comes
    # without its stack, cause not found yet. Every stack given is the lock's; nearly
    # every breach has one.
    given = [b for b in waits if b.get("block_stack")]
    check(len(given) >= 0.75 * len(waits), "%d of %d syscall breaches carry a stack: %r"
          % (len(given), len(waits), [(b["state"], b.get("block_stack_error")) for b in waits]))
    for b in given:
        check_lock_stack(b.get("block_stack"), "syscall of tid %d at %d"
                         % (b["tid"], b["start_ns"]))


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
    missed = blocks["not_kept_or_sent"] + lost["recursion"] + lost["unseen_switch_in"]
    check(between - missed <= blocks["taken"] <= since_birth + 2,
          "%d stacks taken; the kernel counted %d voluntary switches between the first sleep "
          "and the last wakeup, %d since the thread began (%d missed)\n%s"
          % (blocks["taken"], between, since_birth, missed, run.describe()))
    check(0 < blocks["shown"] <= min(blocks["taken"], len(run.breaches())),
          "%r, %d breaches" % (blocks, len(run.breaches())))
