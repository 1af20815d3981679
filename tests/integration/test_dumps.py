# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Dumps for real: files per breach, what `report` finds in them, policy, safe files."""
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time

from harness import (HYBTRACE, ROOT, Attached, Failure, Skip, check, hybtrace, need_root,
                     report_json, test, tp_query, trace_processor, wait_for, workload)
from perfetto_checks import check_dump, check_sample_depths

PROTO = os.path.join(ROOT, "tests", "perfetto", "trace.proto")


def protoc_decodes(path):
    """protoc decodes the file with the project's .proto and finds no unknown fields."""
    if not shutil.which("protoc"):
        raise Failure("protoc is missing (make deps installs protobuf-compiler)")
    with open(path, "rb") as f:
        p = subprocess.run(["protoc", "--decode=hybtrace_check.Trace", "-I",
                            os.path.dirname(PROTO), PROTO], stdin=f, capture_output=True,
                           timeout=60)
    check(p.returncode == 0, "protoc cannot decode %s: %s" % (path, p.stderr[-500:]))
    unknown = [l for l in p.stdout.decode(errors="replace").splitlines()
               if l.strip()[:1].isdigit()]
    check(not unknown, "fields protoc does not know in %s: %r" % (path, unknown[:5]))


def dumps_in(d):
    """The dumps in D; every one must decode with protoc against the project's .proto."""
    found = sorted(glob.glob(os.path.join(d, "*.perfetto-trace")))
    for path in found:
        protoc_decodes(path)
    return found


def dump_lines(run):
    """The dumps written, as the JSON stream said (some a worse one may have replaced)."""
    return [o for o in run.json_lines() if o.get("type") == "dump"]


def dump_of(outdir, kind, tid):
    """The report of the dump of KIND for thread TID."""
    for path in dumps_in(outdir):
        r = report_json(path)
        if r["kind"] == kind and r.get("tid") == tid:
            return r
    raise Failure("no %s dump for tid %d among %r" % (kind, tid, dumps_in(outdir)))


@test
def rq_delay_dump_names_the_culprit():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        # Dumps of waits as they come (the worst waits of a busy machine are those that
        # other tasks lengthened): the hog leads the waits it alone makes.
        run = hybtrace(["run", "--json", "--rq-delay", "500us", "--output", out,
                        "--min-interval", "100ms", "--max-dumps", "8", "--dump-policy", "first",
                        "--no-children", "--", workload("rq_contention"), "0", "1500"])
        check(run.rc == 0, run.describe())
        hog = run.events("contention_start")[0]["hog_pid"]
        victim = run.events("contention_start")[0]["tid"]
        # Dumps that fall inside the contention: the hog must lead their culprits.
        reports = [report_json(p) for p in dumps_in(out)]
        inside = [r for r in reports if r.get("tid") == victim and r["ran_instead"]
                  and r["start_ns"] > run.events("contention_start")[0]["ts_ns"]]
        check(len(inside) >= 3, "want 3+ rq-delay dumps during the contention: %r" % reports)
        # On a busy machine other tasks pinned nowhere take part of some waits, and now
        # and then most of them (a compiler's or a database's slice on that CPU is longer
        # than the threshold): the hog is among the culprits of nearly all dumps, and leads
        # most of those where other tasks ran less than half the wait.
        name = "rq_hog[%d]" % hog
        is_hog = lambda c: (c["comm"], c["pid"]) == ("rq_hog", hog)
        own = lambda r: sum(c["ns"] for c in r["ran_instead"] if is_hog(c)
                            or c["comm"].startswith("hybtrace"))
        quiet = [r for r in inside
                 if 2 * (sum(c["ns"] for c in r["ran_instead"]) - own(r)) < r["duration_ns"]]
        led = [r for r in quiet if is_hog(r["ran_instead"][0])]
        check(len(led) > len(quiet) / 2, "%s led %d of the %d dumps others took little of: %r"
              % (name, len(led), len(quiet), [r["ran_instead"] for r in quiet]))
        named = [r for r in inside if any(is_hog(c) for c in r["ran_instead"])]
        check(len(named) >= 0.75 * len(inside), "%s is among the culprits of %d of %d dumps: %r"
              % (name, len(named), len(inside), [r["ran_instead"] for r in inside]))
        for r in inside:
            check(r["kernel_stack"], "no kernel stack in %r" % r)
            check(r["losses"]["loss.ring_buffer_drops"] == 0, "losses %r" % r["losses"])
            check(r["timeline"], "empty timeline")


def off_cpu_dump(how, stack_words):
    with tempfile.TemporaryDirectory() as out:
        # Off-CPU alone: under load the victim's run-queue wait after its wakeup may be the
        # worse breach of the moment, and take the dump.
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms",
                        "--min-interval", "0ms", "--output", out, "--",
                        workload("offcpu_wake"), how, "20", "1"])
        check(run.rc == 0, run.describe())
        victim = run.events("block_start")[0]["tid"]
        releaser = run.events("release")[0]["tid"]
        r = dump_of(out, "off-cpu", victim)
        check(r["duration_ns"] >= 20_000_000, "duration %r" % r["duration_ns"])
        chain = r["wakeup_chain"]
        check(chain and chain[0]["waker_tid"] == releaser and chain[0]["waker_comm"] == "releaser",
              "wakeup chain %r, want releaser %d" % (chain, releaser))
        check(r["off_cpu"]["state"] == "S", "state %r" % r["off_cpu"])
        stack = " ".join(r["kernel_stack"])
        check(any(w in stack for w in stack_words), "stack %s lacks %r" % (stack, stack_words))


@test
def off_cpu_futex_dump():
    need_root()
    off_cpu_dump("futex", ["futex"])


@test
def off_cpu_pipe_dump():
    need_root()
    off_cpu_dump("pipe", ["pipe_read", "vfs_read"])


def check_in_perfetto(out):
    """Every dump in OUT as Perfetto's own importer reads it (perfetto_checks.py), and what
    report says of its flows; returns the flows and the sampled stacks checked."""
    flows = stacks = 0
    for path in dumps_in(out):
        n = check_dump(path)
        r = report_json(path)
        check(r["flows"] == {"begun": n, "ends_dropped": 0},
              "report reads the flows of %s as %r, Perfetto imports %d" % (path, r["flows"], n))
        flows += n
        stacks += check_sample_depths(path)
    return flows, stacks


@test
def demo_dumps_in_perfetto():
    """The demo's dumps in the Perfetto UI: every wakeup arrow the file begins (the demo's
    workers are woken by timers: the waker relation is native, a thread state's waker), no
    import error, no thread on a CPU or hybtrace track, sampled stacks nested outermost
    first."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "1ms", "--max-dumps", "3", "--output",
                        out, "--no-children", "--", workload("demo_service"), "2"], timeout=120)
        check(run.rc == 0, run.describe())
        check(dumps_in(out), "no dump: " + run.describe())
        _, stacks = check_in_perfetto(out)
        woken = sum(tp_query(path, "select count(*) as n from thread_state where state = 'R' "
                             "and (waker_utid is not null or irq_context = 1)")[0]["n"]
                    for path in dumps_in(out))
        check(woken > 0, "no thread state woken by a task or an interrupt in the demo's dumps")
        check(stacks > 0, "no sampled stack in the demo's dumps")


@test
def off_cpu_dump_in_perfetto():
    """An off-CPU dump in the Perfetto UI: no import error, and the blocked thread's wait in
    the run queue (its thread state R) has the releaser for its waker, as the arrow from
    waker to wakee that the UI draws for a thread state, with no TrackEvent flow for it."""
    need_root()
    trace_processor()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--off-cpu", "10ms", "--min-interval", "0ms",
                        "--output", out, "--", workload("offcpu_wake"), "futex", "20", "2"])
        check(run.rc == 0, run.describe())
        check(dumps_in(out), "no dump: " + run.describe())
        flows, _ = check_in_perfetto(out)
        check(flows == 0, "%d TrackEvent flows: the waker relation is native" % flows)
        releaser = run.events("release")[0]["tid"]
        woken = 0
        for path in dumps_in(out):
            r = report_json(path)
            if r.get("tid") not in [e["tid"] for e in run.events("block_start")]:
                continue
            woken += tp_query(path, "select count(*) as n from thread_state ts join thread t "
                              "using (utid) where t.tid = %d and ts.state = 'R' and "
                              "ts.waker_utid in (select utid from thread where tid = %d)"
                              % (r["tid"], releaser))[0]["n"]
        check(woken > 0, "no run-queue wait of the blocked thread woken by the releaser %d"
              % releaser)


@test
def syscall_dump_shows_the_sleep():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--syscall", "10ms", "--output",
                        out, "--", workload("sleeper"), "15", "1"])
        check(run.rc == 0, run.describe())
        tid = run.events("sleep_start")[0]["tid"]
        r = dump_of(out, "syscall", tid)
        stack = " ".join(r["kernel_stack"])
        check("nanosleep" in stack, "stack lacks the nanosleep entry: %s" % stack)
        names = [l["name"] for l in r["timeline"]]
        check("clock_nanosleep" in names or "nanosleep" in names,
              "no nanosleep slice in the timeline: %r" % names[:40])


@test
def manual_and_exit_dumps():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        target = subprocess.Popen(["sleep", "30"])
        ht = Attached(["--pid", str(target.pid), "--output", out, "--dump-on-exit", "--quiet",
                       "--json"])
        try:
            ht.wait_attached()
            ht.proc.send_signal(signal.SIGUSR2)
            wait_for(lambda: glob.glob(os.path.join(out, "*-manual.perfetto-trace")), 10,
                     "the manual dump")
            rc = ht.stop()
        finally:
            target.kill()
            target.wait()
            ht.close()
        check(rc == 0, "rc %d: %s" % (rc, ht.stderr()))
        kinds = sorted(report_json(f)["kind"] for f in dumps_in(out))
        check(kinds == ["exit", "manual"], "dump kinds %r" % kinds)
        for f in dumps_in(out):
            check(stat.S_IMODE(os.stat(f).st_mode) == 0o640, "mode of %s" % f)


@test
def breach_storm_respects_the_limits():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--syscall", "500us", "--output", out,
                        "--min-interval", "1s", "--max-dumps", "3", "--quiet",
                        "--", workload("breach_storm"), "5", "800"], timeout=90)
        check(run.rc == 0, run.describe())
        sleeps = run.events("storm_end")[0]["sleeps"]
        s = run.summary()
        reported = len(run.breaches())
        dumps = dumps_in(out)
        check(len(dumps) == 3, "%d dumps with --max-dumps 3" % len(dumps))
        # The worst three are kept: more may have been written, the less bad removed.
        check(s["dumps"]["kept"] == 3 and s["dumps"]["written"] == len(dump_lines(run)) ==
              3 + s["dumps"]["replaced"], "summary %r" % s["dumps"])
        starts = sorted(report_json(f)["end_ns"] for f in dumps)
        # Beside a busy host an 800 us sleep took 1.75 ms: 2859 sleeps in 5 s.
        check(sleeps >= 2000, "the storm made only %d sleeps" % sleeps)
        # The monitor kept up: every breach the kernel found was reported or counted lost.
        check(s["detected"] == reported + s["lost"]["ring_buffer"],
              "detected %d != reported %d + dropped %d" % (s["detected"], reported,
                                                           s["lost"]["ring_buffer"]))
        storm = [b for b in run.breaches("syscall") if b["comm"] == "storm"]
        check(len(storm) >= sleeps * 0.9, "%d syscall breaches for %d sleeps"
              % (len(storm), sleeps))
        skipped = sum(s["dumps"]["skipped"].values())
        check(skipped + s["dumps"]["written"] >= reported * 0.99,
              "decisions do not add up: %r" % s["dumps"])
        check(len(starts) == 3, "breach times %r" % starts)


@test
def rate_and_disk_limits():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        # Breaches for 6 s, one dump a second at most: six chances to dump, of which a 10k
        # budget takes at most two of today's dumps (6-7 kB each; a run under load once had
        # only four chances in 4 s, and four such dumps fitted the 20k budget it had).
        run = hybtrace(["run", "--json", "--syscall", "500us", "--output", out,
                        "--min-interval", "1s", "--max-disk", "10k", "--quiet",
                        "--", workload("breach_storm"), "6", "800"], timeout=90)
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        total = sum(os.path.getsize(f) for f in dumps)
        s = run.summary()
        # The budget is checked before each dump: at most one dump beyond it.
        biggest = max(os.path.getsize(f) for f in dumps) if dumps else 0
        check(dumps and total <= 10 * 1024 + biggest,
              "%d bytes in %d dumps written with --max-disk 10k" % (total, len(dumps)))
        check(s["dumps"]["skipped"]["max_disk"] > 0, "no max-disk decision: %r" % s["dumps"])
        # At most one dump per second (plus the first).
        check(s["dumps"]["skipped"]["min_interval"] > 0 and len(dumps) <= 7,
              "%d dumps in 6 s with --min-interval 1s: %r" % (len(dumps), s["dumps"]))


# Breaches of known sizes: sleep_series sleeps each listed time in clock_nanosleep and waits
# in poll() between two, so that with --syscalls clock_nanosleep only the sleeps breach.
SERIES = ["--rq-delay", "off", "--syscall", "10ms", "--syscalls", "clock_nanosleep"]


def sleeps_of(run):
    """The workload's sleeps as it timed them: (start_ns, end_ns, slept_ns, asked_ns) each."""
    asked = {e["i"]: e["delay_ns"] for e in run.events("sleep_start")}
    return [(e["start_ns"], e["ts_ns"], e["slept_ns"], asked.get(e["i"], 0))
            for e in run.events("sleep_end")]


def sleep_of_dump(run, r):
    """The sleep whose breach the dump report R is of."""
    found = [s for s in sleeps_of(run) if s[0] <= r["start_ns"] and r["end_ns"] <= s[1]]
    check(len(found) == 1, "the dump's breach [%d, %d] is within %d sleeps: %r"
          % (r["start_ns"], r["end_ns"], len(found), sleeps_of(run)))
    return found[0]


def ratio(b):
    return b["duration_ns"] / b["threshold_ns"]


# The clock's reads around a syscall and its entry and exit.
SLEEP_MARGIN_NS = 2_000_000


def check_no_surely_worse_sleep(run, dumped):
    """No sleep left out of the DUMPED ones (from sleep_of_dump) surely lasted longer in
    the kernel than one of them. A sleep lasts there at least what it asked for
    (clock_nanosleep never returns early) and at most what the workload's clock read
    around it, which also takes in preemptions outside the syscall (a 17 ms sleep read
    40 ms on a loaded machine): the longest by the workload's clock need not be."""
    for s in sleeps_of(run):
        if s in dumped:
            continue
        for d in dumped:
            check(s[3] <= d[2] + SLEEP_MARGIN_NS,
                  "a sleep of %d ns asked is not dumped, a sleep of %d ns (%d ns asked) is; "
                  "the sleeps (start, end, slept, asked): %r" % (s[3], d[2], d[3],
                                                                 sleeps_of(run)))


@test
def the_worst_breach_of_an_interval_is_dumped():
    """Sleeps of 12, 17, 22, 27, 32 ms within one --min-interval: one dump, of the longest,
    written when the interval ends (the workload idles on for 3 s after them)."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out, "--min-interval", "1s"] + SERIES +
                       ["--", workload("sleep_series"), "0", "12,17,22,27,32", "3000"])
        offset_ns = (time.time() - time.monotonic()) * 1e9
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        check(len(dumps) == 1, "want one dump for one interval, got %r\n%s"
              % (dumps, run.describe()))
        r = report_json(dumps[0])
        sleeps = sleeps_of(run)
        check(len(sleeps) == 5 and len(run.breaches("syscall")) == 5,
              "5 sleeps, 5 breaches: %r\n%s" % (sleeps, run.describe()))
        check_no_surely_worse_sleep(run, [sleep_of_dump(run, r)])
        # By the live breaches too: the dump's is the worst ratio of them all.
        worst = max(run.breaches("syscall"), key=ratio)
        check((r["start_ns"], r["end_ns"]) == (worst["start_ns"], worst["end_ns"]),
              "the dump is of [%d, %d], the worst breach was %r"
              % (r["start_ns"], r["end_ns"], worst))
        s = run.summary()
        check(s["dumps"]["policy"] == "worst" and s["dumps"]["kept"] == 1 and
              s["dumps"]["skipped"]["min_interval"] == 4, "summary %r" % s["dumps"])
        # Chosen at the interval's end, not at exit: written while the workload idled.
        written_ns = os.stat(dumps[0]).st_mtime_ns - offset_ns
        end_ns = run.events("series_end")[0]["ts_ns"]
        check(written_ns < end_ns, "the dump was written %.3f s after the workload's end"
              % ((written_ns - end_ns) / 1e9))


@test
def first_policy_dumps_the_first_breach_of_an_interval():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out, "--min-interval", "1s",
                        "--dump-policy", "first"] + SERIES +
                       ["--", workload("sleep_series"), "0", "12,17,22,27,32", "0"])
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        check(len(dumps) == 1, "want one dump, got %r\n%s" % (dumps, run.describe()))
        mine = sleep_of_dump(run, report_json(dumps[0]))
        check(mine == sleeps_of(run)[0], "the dump is of %r, not of the first sleep %r"
              % (mine, sleeps_of(run)))
        s = run.summary()
        check(s["dumps"]["policy"] == "first" and s["dumps"]["skipped"]["min_interval"] == 4,
              "summary %r" % s["dumps"])


@test
def max_dumps_keeps_the_worst_when_they_come_last():
    """Six sleeps, each worse than the one before, each in an interval of its own, with
    --max-dumps 2: the two files left are of the two worst; each worse one replaced the
    least bad, said on stderr and as a JSON line."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out, "--min-interval", "100ms",
                        "--max-dumps", "2"] + SERIES +
                       ["--", workload("sleep_series"), "1000", "12,17,22,27,32,37"],
                       timeout=90)
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        check(len(dumps) == 2, "want 2 dumps left, got %r\n%s" % (dumps, run.describe()))
        reports = [report_json(d) for d in dumps]
        live = run.breaches("syscall")
        check(len(live) == 6, "6 breaches: %r" % live)
        s = run.summary()
        written, replaced = dump_lines(run), [o for o in run.json_lines()
                                              if o.get("type") == "dump_replaced"]
        check(s["dumps"]["kept"] == 2 and s["dumps"]["written"] == len(written) and
              s["dumps"]["replaced"] == len(replaced) == len(written) - 2,
              "summary %r, %d dump lines, %d replaced lines" % (s["dumps"], len(written),
                                                                len(replaced)))
        for o in replaced:
            check(not os.path.exists(o["old"]) and o["removed"], "%s is still there" % o["old"])
            check(o["old_ratio"] < o["new_ratio"], "a less bad dump replaced a worse: %r" % o)
        check(len(replaced) >= 1 and "hybtrace: dump replaced: " in run.stderr,
              run.stderr[-2000:])
        # The kept are the worst by the breach in each dump, among all the live breaches...
        kept = sorted(ratio(r) for r in reports)
        if s["dumps"]["skipped"]["busy"] == 0:
            check(kept == sorted(ratio(b) for b in live)[-2:],
                  "kept %r, the live breaches %r" % (kept, sorted(ratio(b) for b in live)))
            # ...and by the workload's own clock.
            check_no_surely_worse_sleep(run, [sleep_of_dump(run, r) for r in reports])
        else:
            # A builder slower than a second a dump merged intervals: the worst is kept still.
            check(kept[-1] == max(ratio(b) for b in live), "kept %r, live %r" % (kept, live))
        p = subprocess.run([HYBTRACE, "report", "--json", out], capture_output=True, text=True,
                           timeout=60)
        check(p.returncode == 0 and sorted(r["file"] for r in json.loads(p.stdout)) == dumps,
              "report %s: %s %s" % (out, p.stdout, p.stderr))


@test
def breaches_ending_together_make_one_dump():
    """Two threads' off-CPU waits that end together (the releaser wakes from its sleep and
    wakes the blocked thread), and a sleep that breaches the off-CPU and the syscall
    threshold at once: one dump each run, of the worse."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms",
                        "--output", out, "--", workload("offcpu_wake"), "futex", "20", "1"])
        check(run.rc == 0, run.describe())
        live = run.breaches("off-cpu")
        check(len(live) >= 2, "want the two waits' breaches: %r" % live)
        dumps = dumps_in(out)
        check(len(dumps) == 1, "want one dump, got %r\n%s" % (dumps, run.describe()))
        # The blocked thread waited from before the releaser's sleep to after its end.
        blocked = run.events("block_start")[0]["tid"]
        r = report_json(dumps[0])
        check(r["tid"] == blocked, "the dump is of tid %r, the blocked thread is %d: %r"
              % (r.get("tid"), blocked, live))
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms", "--syscall",
                        "10ms", "--output", out, "--", workload("sleeper"), "30", "1"])
        check(run.rc == 0, run.describe())
        tid = run.events("sleep_start")[0]["tid"]
        # Only the sleep's own breaches: on a loaded machine another syscall of the same
        # thread (a log write, exit) may sit 10 ms in the run queue and breach alone.
        kinds = [b["kinds"] for b in run.breaches() if b["tid"] == tid
                 and b.get("syscall") in ("nanosleep", "clock_nanosleep")]
        check(kinds == [["off-cpu", "syscall"]], "breaches of the sleep: %r (summary %r)\n%s"
              % (kinds, run.summary(), run.describe()))
        dumps = dumps_in(out)
        check(len(dumps) == 1, "want one dump, got %r\n%s" % (dumps, run.describe()))
        check(report_json(dumps[0])["kind"] == "off-cpu+syscall", "dumped %r"
              % report_json(dumps[0])["kind"])


@test
def output_dir_errors_at_startup():
    need_root()
    with tempfile.TemporaryDirectory() as tmp:
        regular = os.path.join(tmp, "file")
        open(regular, "w").close()
        for bad, needle in [(os.path.join(tmp, "missing"), "No such file"),
                            (regular, "not a directory")]:
            p = subprocess.run([HYBTRACE, "run", "--output", bad, "--", "true"],
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 2, "rc %d for --output %s" % (p.returncode, bad))
            check(needle in p.stderr and p.stderr.strip().count("\n") == 0,
                  "stderr %r" % p.stderr)
        ro = os.path.join(tmp, "ro")
        os.mkdir(ro)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "none", ro], check=True)
        try:
            p = subprocess.run([HYBTRACE, "run", "--output", ro, "--", "true"],
                               capture_output=True, text=True, timeout=30)
            check(p.returncode == 2 and "not writable" in p.stderr,
                  "read-only dir: rc %d %r" % (p.returncode, p.stderr))
        finally:
            subprocess.run(["umount", ro])


@test
def dumps_belong_to_the_sudo_user():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        os.chmod(out, 0o777)
        # The run-queue threshold off: on a loaded machine a run-queue wait, worse by its
        # ratio, would take the one dump of the interval.
        run = hybtrace(["run", "--syscall", "10ms", "--rq-delay", "off", "--output", out,
                        "--quiet", "--", workload("sleeper"), "15", "1"],
                       env={"SUDO_UID": "65534", "SUDO_GID": "65534"})
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        check(dumps, "no dump")
        st = os.stat(dumps[0])
        check(st.st_uid == 65534 and st.st_gid == 65534, "owner %d:%d" % (st.st_uid, st.st_gid))
        check(stat.S_IMODE(st.st_mode) == 0o640, "mode %o" % stat.S_IMODE(st.st_mode))
        # report needs no privileges: nobody reads a copy of it.
        copy = os.path.join(out, "copy.perfetto-trace")
        shutil.copy(dumps[0], copy)
        os.chmod(copy, 0o644)
        p = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "--inh-caps=-all", HYBTRACE, "report", copy],
                           capture_output=True, text=True, timeout=30)
        check(p.returncode == 0 and "syscall" in p.stdout, "unprivileged report (rc %d): %s%s"
              % (p.returncode, p.stderr, p.stdout[:600]))


@test
def report_directory_lists_worst_first():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        # A 15 ms sleep over a 5 ms threshold is worse than a 40 ms one over 30 ms: the
        # order by ratio is not the order by duration.
        for threshold, sleep_ms in (("5ms", "15"), ("30ms", "40")):
            run = hybtrace(["run", "--json", "--syscall", threshold, "--rq-delay", "off",
                            "--min-interval", "0ms", "--output", out, "--quiet", "--",
                            workload("sleeper"), sleep_ms, "1"])
            check(run.rc == 0, run.describe())
        p = subprocess.run([HYBTRACE, "report", "--json", out], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, p.stderr)
        rows = json.loads(p.stdout)
        # Worst by the ratio to its own threshold, as the dump policy ranks them (run-queue
        # waits of a loaded machine, threshold 1ms, fall among them).
        check(any(r.get("duration_ns", 0) > 30_000_000 for r in rows[1:]),
              "the 40 ms sleep should come after the 15 ms one: %r" % rows)
        ratios = [r["duration_ns"] / r["threshold_ns"] for r in rows if "duration_ns" in r]
        check(len(ratios) >= 2 and ratios == sorted(ratios, reverse=True),
              "not worst first: %r" % [(r.get("kind"), r.get("duration_ns"), r.get("threshold_ns"))
                                       for r in rows])
        p = subprocess.run([HYBTRACE, "report", out], capture_output=True, text=True)
        check(p.returncode == 0 and "syscall" in p.stdout, p.stdout + p.stderr)


def wait_skew_ns(r):
    """How far the dump's run-queue slice of the breach starts from the breach itself.

    The live line charges the wait from the monitor's start (sched_info's last_queued), the
    dump from the flight recorder's wakeup record: two estimates of one moment on the run
    queue's clock, usually equal, microseconds apart on a loaded machine. Both end at the
    switch-in. Culprit times may differ by that much and no more."""
    rq = [l for l in r["timeline"] if l["name"] == "runqueue"
          and l["thread"].endswith("[%d]" % r["tid"])
          and l["t_ns"] + l["dur_ns"] == r["duration_ns"]]
    check(rq, "no run-queue slice of %d ends at the breach's %d ns (%s): %r"
          % (r["tid"], r["duration_ns"], {k: r.get(k) for k in ("kind", "start_ns", "end_ns")},
             [l for l in r["timeline"] if l["category"] == "sched"]))
    return abs(rq[0]["t_ns"]) + 1000


@test
def report_json_ran_instead_is_the_live_breachs():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "500us", "--output", out,
                        "--min-interval", "100ms", "--max-dumps", "6", "--no-children",
                        "--", workload("rq_contention"), "0", "1000"])
        check(run.rc == 0, run.describe())
        hog = run.events("contention_start")[0]["hog_pid"]
        # Dumps a worse one replaced are gone.
        gone = {o["old"] for o in run.json_lines() if o.get("type") == "dump_replaced"}
        dumps = [o for o in dump_lines(run) if o["path"] not in gone]
        live = {(b["tid"], b["start_ns"], b["end_ns"]): b for b in run.breaches("rq-delay")}
        compared = named = 0
        for d in dumps:
            r = report_json(d["path"])
            b = live.get((r.get("tid"), r.get("start_ns"), r.get("end_ns")))
            if not b or not b["ran_instead"]:
                continue
            compared += 1
            skew = wait_skew_ns(r)
            keys = {"pid", "comm", "cpu", "ns"}
            for c in b["ran_instead"] + r["ran_instead"]:
                check(set(c) == keys, "ran_instead entry %r, want the keys %r" % (c, keys))
            for k in ("ran_instead_other_ns", "ran_instead_unknown_ns", "ran_instead_idle_ns"):
                check(abs(r[k] - b[k]) <= skew, "%s: live %d, report %d, skew %d"
                      % (k, b[k], r[k], skew))
            seen = {c["pid"]: c for c in r["ran_instead"]}
            for c in b["ran_instead"]:
                # A task that held the CPU for less than the skew may be left out of one.
                if c["pid"] not in seen:
                    check(c["ns"] <= skew, "%r is not in the report's %r"
                          % (c, r["ran_instead"]))
                    continue
                other = seen[c["pid"]]
                # Names are looked up when each is written: another task may exec between
                # the two (a busy machine's builds do); the hog keeps its name.
                check((other["comm"] == c["comm"] or c["pid"] != hog)
                      and other["cpu"] == c["cpu"]
                      and abs(other["ns"] - c["ns"]) <= skew,
                      "live %r, report %r, skew %d" % (c, other, skew))
            named += any(c["pid"] == hog and c["comm"] == "rq_hog" for c in r["ran_instead"])
        check(compared >= 2 and named, "%d dumps of live breaches with culprits, %d name the "
              "hog %d\n%s" % (compared, named, hog, run.describe()))
        # The dump line's time is the builder's, not the breach's: it says so.
        check("events, built and written in " in run.stderr, run.stderr[-2000:])


@test
def a_wait_moved_while_queued_names_the_same_culprits_live_and_dumped():
    """Issue 14 defect 3: the migrator, preempted on CPU 1 by cpu1_hog, is moved while it
    waits to CPU 0's queue (sched_setaffinity by another process), where cpu0_hog spins. Its
    wait began at the preemption, on CPU 1 (Debian's 6.1 restarts sched_info's clock at the
    enqueue on CPU 0, after the move), and was spent behind both hogs, each on its CPU; the
    live line and the dump name them alike."""
    need_root()
    if os.cpu_count() < 2:
        raise Skip("needs two CPUs")
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "10ms", "--output", out,
                        "--min-interval", "0ms", "--max-dumps", "8", "--no-children", "--",
                        workload("migrate_wait"), "80", "queued"])
        check(run.rc == 0, run.describe())
        hogs, moved, gaps = run.events("hogs"), run.events("moved"), run.events("gaps")
        check(hogs and moved and gaps, "workload log incomplete\n" + run.describe())
        hogs = hogs[0]
        start_ns, move_ns = hogs["start_ns"], moved[0]["ts_ns"]
        # When the migrator last ran before the move, as it saw it: mostly the hogs' start,
        # later where the fair server gave it a turn on CPU 1 in between.
        around = [g for g in gaps[0]["gaps"] if g[0] < move_ns < g[1]]
        check(around, "the migrator ran at the move (%d)? its gaps %r" % (move_ns, gaps))
        stopped_ns = around[0][0]
        waits = [b for b in run.breaches("rq-delay") if b["tid"] == hogs["tid"]
                 and b["start_ns"] < move_ns < b["end_ns"]]
        check(len(waits) == 1, "want one wait across the move at %d, got %r\n%s"
              % (move_ns, waits, run.describe()))
        b = waits[0]
        check(abs(b["start_ns"] - stopped_ns) <= 2_000_000 and b["wake_cpu"] == 1
              and b["cpu"] == 0,
              "the wait from CPU %d to CPU %d began %.2f ms after the hogs started, the "
              "migrator last ran %.2f ms after, the move %.2f ms after: want it to begin with "
              "the preemption on CPU 1" % (b["wake_cpu"], b["cpu"], (b["start_ns"] - start_ns) / 1e6,
                                           (stopped_ns - start_ns) / 1e6,
                                           (move_ns - start_ns) / 1e6))
        by_name = {c["comm"]: c for c in b["ran_instead"]}
        cpu0, cpu1 = by_name.get("cpu0_hog"), by_name.get("cpu1_hog")
        check(cpu0 and cpu1 and b["ran_instead"][0] is cpu0 and cpu0["cpu"] == 0
              and cpu1["cpu"] == 1 and cpu1["ns"] >= (move_ns - stopped_ns) // 2,
              "live, the %.2f ms wait moved at +%.2f ms: ran instead %r" % (
                  b["duration_ns"] / 1e6, (move_ns - b["start_ns"]) / 1e6, b["ran_instead"]))
        reports = [r for r in map(report_json, [o["path"] for o in run.json_lines()
                                                if o.get("type") == "dump"])
                   if (r.get("tid"), r.get("start_ns"), r.get("end_ns")) ==
                   (b["tid"], b["start_ns"], b["end_ns"])]
        check(reports, "no dump of the wait\n" + run.describe())
        # One computation: the same tasks on the same CPUs, times as far apart as the two
        # estimates of the wait's start.
        skew = wait_skew_ns(reports[0])
        live = {c["pid"]: c for c in b["ran_instead"]}
        dumped = {c["pid"]: c for c in reports[0]["ran_instead"]}
        for pid in set(live) | set(dumped):
            c, d = live.get(pid, {"ns": 0, "cpu": None}), dumped.get(pid, {"ns": 0, "cpu": None})
            check(abs(c["ns"] - d["ns"]) <= skew and (c["cpu"] == d["cpu"] or
                                                      max(c["ns"], d["ns"]) <= skew),
                  "live %r, the dump %r" % (b["ran_instead"], reports[0]["ran_instead"]))


# Two processes pinned to one CPU that pass a byte back and forth: tens of thousands of
# context switches a second there (about 70k here), enough to wrap a 1M flight-recorder
# ring (32768 records) in well under a second.
# At nice 19, so hybtrace and the workload still run when they need to; for at most
# SECONDS, and the child goes when the parent does (its pipe's writer closes).
SWITCH_CHURN = """
import os, sys, time
os.sched_setaffinity(0, {int(sys.argv[1])})
os.nice(19)
end = time.monotonic() + float(sys.argv[2])
a_r, a_w = os.pipe()
b_r, b_w = os.pipe()
if os.fork() == 0:
    os.close(a_w)
    os.close(b_r)
    while os.read(a_r, 1):
        os.write(b_w, b"x")
    os._exit(0)
os.close(a_r)
os.close(b_w)
while time.monotonic() < end:
    os.write(a_w, b"x")
    os.read(b_r, 1)
"""


@test
def clipped_off_cpu_dump_keeps_the_threads_state():
    need_root()
    # The releaser sleeps 3 s in clock_nanosleep while every CPU's ring wraps: the window
    # is clipped and its switch-out is gone, but the breach knows how it slept. Its dump
    # is the first (the blocked thread's waits for it, and may find its own end gone too).
    churn = [subprocess.Popen([sys.executable, "-c", SWITCH_CHURN, str(cpu), "60"],
                              start_new_session=True)
             for cpu in range(min(os.cpu_count(), 2))]
    try:
        with tempfile.TemporaryDirectory() as out:
            run = hybtrace(["run", "--json", "--off-cpu", "1s", "--rq-delay", "off",
                            "--history", "1M", "--min-interval", "0ms", "--output", out,
                            "--", workload("offcpu_wake"), "futex", "3000", "1"])
            check(run.rc == 0, run.describe())
            releaser = run.events("release")[0]["tid"]
            live = [b for b in run.breaches("off-cpu") if b["tid"] == releaser]
            check(live and live[0]["state"] == "S", "live breach %r, want state S" % live)
            r = dump_of(out, "off-cpu", releaser)
    finally:
        for p in churn:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    check(r["clipped"] and r["start_ns"] < r["clipped_to_ns"] < r["end_ns"],
          "want the rings to have lost the switch-out but not the wait's end: clipped to %r, "
          "breach [%d, %d]" % (r.get("clipped_to_ns"), r["start_ns"], r["end_ns"]))
    check("off_cpu" in r, "no off-cpu slice starts at the breach: %r" % r)
    check(r["off_cpu"]["state"] == "S", "state %r, want S" % r["off_cpu"])
    check(r["off_cpu"]["syscall"] == "" or "nanosleep" in r["off_cpu"]["syscall"],
          "syscall %r" % r["off_cpu"])
    check("nanosleep" in " ".join(r["kernel_stack"]), "stack %r" % r["kernel_stack"])
