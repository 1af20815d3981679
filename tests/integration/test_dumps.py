# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Dumps for real: files per breach, what `report` finds in them, policy, safe files."""
import glob
import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile

from harness import (HYBTRACE, ROOT, Attached, Failure, check, hybtrace, need_root,
                     report_json, test, wait_for, workload)

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
        run = hybtrace(["run", "--json", "--rq-delay", "500us", "--output", out,
                        "--min-interval", "100ms", "--max-dumps", "8",
                        "--", workload("rq_contention"), "0", "1500"])
        check(run.rc == 0, run.describe())
        hog = run.events("contention_start")[0]["hog_pid"]
        victim = run.events("contention_start")[0]["tid"]
        # Dumps that fall inside the contention: the hog must lead their culprits.
        reports = [report_json(p) for p in dumps_in(out)]
        inside = [r for r in reports if r.get("tid") == victim and r["ran_instead"]
                  and r["start_ns"] > run.events("contention_start")[0]["ts_ns"]]
        check(len(inside) >= 3, "want 3+ rq-delay dumps during the contention: %r" % reports)
        # On a busy machine other tasks take part of some waits; the hog is in every
        # one and leads most.
        name = "rq_hog[%d]" % hog
        led = [r for r in inside if r["ran_instead"][0]["task"] == name]
        check(len(led) > len(inside) / 2, "%s led %d of %d dumps: %r"
              % (name, len(led), len(inside), [r["ran_instead"] for r in inside]))
        for r in inside:
            check(any(c["task"] == name for c in r["ran_instead"]),
                  "%s is not among the culprits: %r" % (name, r["ran_instead"]))
        for r in inside:
            check(r["kernel_stack"], "no kernel stack in %r" % r)
            check(r["losses"]["loss.ring_buffer_drops"] == 0, "losses %r" % r["losses"])
            check(r["timeline"], "empty timeline")


def off_cpu_dump(how, stack_words):
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--off-cpu", "10ms", "--min-interval", "0ms",
                        "--output", out, "--", workload("offcpu_wake"), how, "20", "1"])
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
        check(s["dumps"]["written"] == 3, "summary %r" % s["dumps"])
        starts = sorted(report_json(f)["end_ns"] for f in dumps)
        check(sleeps >= 3000, "the storm made only %d sleeps" % sleeps)
        # The monitor kept up: every breach the kernel found was reported or counted lost.
        check(s["detected"] == reported + s["lost"]["ring_buffer"],
              "detected %d != reported %d + dropped %d" % (s["detected"], reported,
                                                           s["lost"]["ring_buffer"]))
        storm = [b for b in run.breaches("syscall") if b["comm"] == "storm"]
        check(len(storm) >= sleeps * 0.9, "%d syscall breaches for %d sleeps"
              % (len(storm), sleeps))
        skipped = sum(s["dumps"]["skipped"].values())
        check(skipped + 3 >= reported * 0.99, "decisions do not add up: %r" % s["dumps"])
        check(len(starts) == 3, "breach times %r" % starts)


@test
def rate_and_disk_limits():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--syscall", "500us", "--output", out,
                        "--min-interval", "1s", "--max-disk", "20k", "--quiet",
                        "--", workload("breach_storm"), "4", "800"], timeout=90)
        check(run.rc == 0, run.describe())
        dumps = dumps_in(out)
        total = sum(os.path.getsize(f) for f in dumps)
        s = run.summary()
        # The budget is checked before each dump: at most one dump beyond it.
        biggest = max(os.path.getsize(f) for f in dumps) if dumps else 0
        check(total <= 20 * 1024 + biggest, "%d bytes written with --max-disk 20k" % total)
        check(s["dumps"]["skipped"]["max_disk"] > 0, "no max-disk decision: %r" % s["dumps"])
        # At most one dump per second (plus the first).
        check(len(dumps) <= 5, "%d dumps in 4 s with --min-interval 1s" % len(dumps))


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
        run = hybtrace(["run", "--syscall", "10ms", "--output", out, "--quiet",
                        "--", workload("sleeper"), "15", "1"],
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
        check(p.returncode == 0 and "syscall" in p.stdout, "unprivileged report: %s" % p.stderr)


@test
def report_directory_lists_worst_first():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--syscall", "10ms", "--min-interval", "0ms",
                        "--output", out, "--quiet", "--", workload("sleeper"), "15", "1"])
        check(run.rc == 0, run.describe())
        run = hybtrace(["run", "--json", "--syscall", "10ms", "--min-interval", "0ms",
                        "--output", out, "--quiet", "--", workload("sleeper"), "40", "1"])
        check(run.rc == 0, run.describe())
        p = subprocess.run([HYBTRACE, "report", "--json", out], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, p.stderr)
        rows = json.loads(p.stdout)
        durations = [r["duration_ns"] for r in rows if "duration_ns" in r]
        check(len(durations) >= 2 and durations == sorted(durations, reverse=True),
              "not worst first: %r" % durations)
        p = subprocess.run([HYBTRACE, "report", out], capture_output=True, text=True)
        check(p.returncode == 0 and "syscall" in p.stdout, p.stdout + p.stderr)
