# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Code triggers for real: hardware breakpoints on workload functions, the stop function, marks."""
import glob
import json
import os
import signal
import subprocess
import tempfile
import time

from harness import (HYBTRACE, WORKLOADS, Attached, Control, Go, Run, Skip, breakpoints_fire,
                     check, hybtrace, need_breakpoints, need_root, read_log, run_answering,
                     test, wait_for, whole_lines, workload)

TARGET = workload("trigger_target")


def triggered(args, mode, timeout=60, env=None, functions=None):
    """`run` ARGS -- trigger_target MODE, answering its "ready" lines for FUNCTIONS."""
    with tempfile.TemporaryDirectory() as out, Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        ht = Attached(["run", "--json", "--rq-delay", "off", "--output", out] + args +
                      ["--", TARGET] + mode,
                      env=dict(env or {}, HT_WORKLOAD_LOG=log, **control.env))
        run = run_answering(ht, Go(control, log, functions), timeout)
        check(run.rc == 0, run.describe())
        hits = [o for o in run.json_lines() if o.get("type") == "trigger"]
        dumps = sorted(glob.glob(os.path.join(out, "*-trigger.perfetto-trace")))
        reports = []
        for d in dumps:
            p = subprocess.run([HYBTRACE, "report", "--json", "--all", d], capture_output=True,
                               text=True, timeout=60)
            check(p.returncode == 0, p.stderr)
            reports.append(json.loads(p.stdout))
        return run, hits, reports


@test
def fires_once_by_default_with_the_arguments():
    need_root()
    need_breakpoints()
    run, hits, reports = triggered(["--trigger", "send_order"], ["calls", "3"])
    calls = run.events("call")
    check(len(calls) == 3, "the workload made %d calls" % len(calls))
    check(len(hits) == 1, "%d hits without --multi, want 1\n%s" % (len(hits), run.describe()))
    check(hits[0]["args"] == calls[0]["args"], "registers %r, the call passed %r"
          % (hits[0]["args"], calls[0]["args"]))
    check(len(reports) == 1 and reports[0]["trigger"]["args"] == calls[0]["args"],
          "the dump does not hold the hit: %r" % [r.get("trigger") for r in reports])
    check(reports[0]["trigger"]["function"] == "send_order", "hit at %r" % reports[0]["trigger"])


@test
def multi_fires_at_every_call():
    need_root()
    need_breakpoints()
    run, hits, reports = triggered(["--trigger", "send_order", "--multi", "--min-interval", "0ms"],
                                   ["calls", "3"])
    calls = run.events("call")
    check([h["args"] for h in hits] == [c["args"] for c in calls],
          "hits %r, calls %r" % ([h["args"] for h in hits], [c["args"] for c in calls]))
    check(len(reports) == 3, "%d dumps for 3 hits with --multi --min-interval 0ms" % len(reports))


@test
def fires_in_a_thread_born_after_attach():
    need_root()
    need_breakpoints()
    run, hits, _ = triggered(["--trigger", "send_order"], ["thread"])
    calls = run.events("call")
    check(hits and calls, "no hit\n" + run.describe())
    check(hits[0]["tid"] == calls[0]["tid"] and hits[0]["tid"] != calls[0]["pid"],
          "hit in tid %d, the call was in new thread %d" % (hits[0]["tid"], calls[0]["tid"]))
    check(hits[0]["args"] == [7, 8, 9], "registers %r" % hits[0]["args"])


@test
def fires_in_a_library_function_through_the_plt():
    need_root()
    need_breakpoints()
    run, hits, _ = triggered(["--trigger", "libc.so.6:getppid", "--multi", "--min-interval",
                              "0ms"], ["plt", "3"])
    check(len(hits) == 3, "%d hits for 3 calls of getppid\n%s" % (len(hits), run.describe()))
    check(all(h["function"] == "getppid" for h in hits), "hits at %r" % hits)


@test
def fires_in_a_library_loaded_with_dlopen_after_attach():
    need_root()
    need_breakpoints()
    lib = os.path.join(WORKLOADS, "libtrig.so")
    run, hits, _ = triggered(["--trigger", "libtrig.so:dl_order", "--multi", "--min-interval",
                              "0ms"], ["dlopen", lib])
    check(len(hits) == 2, "%d hits for 2 calls after dlopen\n%s" % (len(hits), run.describe()))
    check(hits[0]["args"] == [1, 2, 3], "registers %r" % hits[0]["args"])
    check(hits[0]["time_ns"] > run.events("dlopened")[0]["ts_ns"], "hit before the dlopen?")


@test
def follows_the_target_across_exec():
    need_root()
    need_breakpoints()
    run, hits, _ = triggered(["--trigger", "send_order", "--multi", "--min-interval", "0ms"],
                             ["exec"])
    calls = run.events("call")
    execed = run.events("exec")[0]["ts_ns"]
    check(len(calls) == 2, "the new image made %d calls" % len(calls))
    check(all(h["time_ns"] > execed for h in hits), "a hit before the exec: %r" % hits)
    check([h["args"] for h in hits] == [c["args"] for c in calls],
          "hits %r after exec, calls %r" % (hits, calls))


@test
def stop_function_triggers_with_its_argument():
    need_root()
    need_breakpoints()
    run, hits, reports = triggered(["--trigger", "."], ["stop", "42"])
    check(len(hits) == 1 and hits[0]["args"][0] == 42, "hits %r" % hits)
    check(hits[0]["function"] == "hybtrace_trigger", "hit at %r" % hits[0]["function"])
    check(reports and reports[0]["trigger"]["args"][0] == 42, "dump %r" % reports)


@test
def user_marks_sit_between_the_syscalls_around_them():
    need_root()
    need_breakpoints()
    run, hits, reports = triggered(["--trigger", ".", "--syscall", "10s", "--pre", "100ms"],
                                   ["marks", "10"], functions=["hybtrace_trigger"])
    check(reports, "no trigger dump\n" + run.describe())
    # The getppid syscalls, not a sample that caught libc's getppid wrapper on the CPU.
    tl = [l for l in reports[0]["timeline"]
          if (l["name"], l["category"]) in (("getppid", "syscall"), ("order sent", "user"))]
    names = [l["name"] for l in sorted(tl, key=lambda l: l["t_ns"])]
    check(names.count("order sent") == 10, "marks in the dump: %r" % names)
    # Each mark lies between the getppid the workload made before it and the one after.
    pattern = ["getppid", "order sent", "getppid"] * 10
    check(names == pattern, "order in the dump: %r" % names)


def expect_spec_error(specs, needle, pid):
    args = [HYBTRACE, "--pid", str(pid), "--quiet", "--output", tempfile.gettempdir()]
    for s in specs:
        args += ["--trigger", s]
    p = subprocess.run(args, capture_output=True, text=True, timeout=60)
    err = p.stderr.strip()
    check(p.returncode == 2, "%r: rc %d, want 2: %s" % (specs, p.returncode, err))
    check(err.count("\n") == 0 and needle in err, "%r: %r does not say %r" % (specs, err, needle))


@test
def trigger_spec_errors():
    need_root()
    control = Control(start=True)
    log = os.path.join(control.dir, "workload.log")
    target = subprocess.Popen([TARGET, "calls", "1"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL,
                              env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
    try:
        # Its program and libraries are mapped once it says it is ready.
        wait_for(lambda: whole_lines(log), 10, "the target to start")
        expect_spec_error(["send_ordr"], "send_order", target.pid)          # a suggestion
        expect_spec_error(["_dl_catch_exception"], "libc.so.6", target.pid)  # ambiguous
        expect_spec_error(["trigger_target.c:2"], "no code", target.pid)
        expect_spec_error(["a", "b", "c", "d", "e"], "4", target.pid)
        # A module not mapped yet is no error: the target may load it later.
        expect_spec_error(["nosuchmodule.so:x", "send_ordr"], "send_order", target.pid)
    finally:
        target.kill()
        target.wait()
        control.close()


# Debian's python3 links libz itself: the library is mapped as libz.so.1.2.13, called libz.so.1
# by ldd and by its DT_SONAME. Its crc32 calls come from a thread born late, once the test has
# seen the trigger armed at the address the interpreter itself finds (ctypes), its ground truth.
PYTHON = "/usr/bin/python3"
CRC_SCRIPT = r"""
import ctypes, json, os, sys, threading, zlib

log = open(sys.argv[1], "w")
def say(**kw):
    log.write(json.dumps(kw) + "\n")
    log.flush()

crc32 = ctypes.cast(ctypes.CDLL("libz.so.1").crc32, ctypes.c_void_p).value
say(event="ready", crc32=crc32)
sys.stdin.readline()

def work():
    say(event="call", tid=threading.get_native_id(), value=0x5eed, length=11)
    for _ in range(3):
        zlib.crc32(b"hello world", 0x5eed)

t = threading.Thread(target=work)
t.start()
t.join()
"""


@test
def library_trigger_by_its_soname_fires_in_a_late_thread():
    need_root()
    need_breakpoints()
    if not os.access(PYTHON, os.X_OK):
        raise Skip("no %s" % PYTHON)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = os.path.join(tmp, "dumps")
        os.mkdir(out_dir)
        log = os.path.join(tmp, "python.log")
        stdout_path, stderr_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        args = [HYBTRACE, "run", "--json", "--rq-delay", "off", "--trigger", "libz.so.1:crc32",
                "--trigger", "libnotthere.so.9:foo", "--output", out_dir, "--",
                PYTHON, "-c", CRC_SCRIPT, log]
        with open(stdout_path, "w") as so, open(stderr_path, "w") as se:
            proc = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=so, stderr=se, cwd=tmp)

        def text(path):
            with open(path) as f:
                return f.read()

        def describe():
            return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (
                proc.poll(), text(stdout_path)[-3000:], text(stderr_path)[-2000:])

        def armed_at(address):
            want = "trigger libz.so.1:crc32 at %#x in " % address
            return any(want in l and l.endswith(" armed") for l in text(stderr_path).splitlines())

        try:
            wait_for(lambda: proc.poll() is not None or whole_lines(log), 30, "python to start")
            check(proc.poll() is None, "hybtrace exited early:\n" + describe())
            crc32 = whole_lines(log)[0]["crc32"]
            # Armed in this image, at the address python's own libz has: now the thread may start.
            wait_for(lambda: proc.poll() is not None or armed_at(crc32), 30,
                     "the trigger armed at python's crc32 (%#x)" % crc32)
            check(proc.poll() is None, "hybtrace exited early:\n" + describe())
            proc.stdin.write(b"go\n")
            proc.stdin.close()
            rc = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        run = Run(rc, text(stdout_path), text(stderr_path), [])
        check(rc == 0, describe())
        calls = [e for e in whole_lines(log) if e["event"] == "call"]
        check(len(calls) == 1, "python logged %r" % whole_lines(log))
        call = calls[0]
        hits = [o for o in run.json_lines() if o.get("type") == "trigger"]
        check(len(hits) == 1, "%d hits, want 1 (one-shot)\n%s" % (len(hits), describe()))
        hit = hits[0]
        check(hit["function"] == "crc32" and hit["ip"] == crc32,
              "hit at %r (ip %#x), crc32 is at %#x" % (hit["function"], hit["ip"], crc32))
        check(hit["tid"] == call["tid"],
              "hit in tid %d, python called from tid %d" % (hit["tid"], call["tid"]))
        check(hit["args"][0] == call["value"] and hit["args"][2] == call["length"],
              "registers %r, python passed crc32(%#x, buf, %d)"
              % (hit["args"], call["value"], call["length"]))
        dumps = sorted(glob.glob(os.path.join(out_dir, "*.perfetto-trace")))
        check(len(dumps) == 1 and dumps[0].endswith("-trigger.perfetto-trace"),
              "dumps written: %r" % dumps)
        p = subprocess.run([HYBTRACE, "report", "--json", dumps[0]], capture_output=True,
                           text=True, timeout=60)
        check(p.returncode == 0, p.stderr)
        trig = json.loads(p.stdout).get("trigger")
        check(trig and trig["spec"] == "libz.so.1:crc32" and trig["function"] == "crc32" and
              trig["tid"] == call["tid"] and trig["args"][0] == call["value"],
              "the dump's trigger %r, python called crc32(%#x) in tid %d"
              % (trig, call["value"], call["tid"]))
        summary = run.summary()
        check(summary and summary["triggers"]["hits"] == 1 and
              [u["trigger"] for u in summary["triggers"]["never_resolved"]] ==
              ["libnotthere.so.9:foo"], "summary %r" % (summary and summary.get("triggers")))
        check("libnotthere.so.9" in summary["triggers"]["never_resolved"][0]["why"],
              "summary %r" % summary["triggers"])


@test
def summary_names_a_trigger_that_never_resolved():
    need_root()
    run = hybtrace(["run", "--rq-delay", "off", "--trigger", "libnotthere.so.9:foo", "--",
                    TARGET, "calls", "1"])
    check(run.rc == 0, run.describe())
    check("trigger libnotthere.so.9:foo never resolved: no module libnotthere.so.9" in run.stdout,
          "the summary does not name it:\n" + run.describe())


def pid_session(control, extra=(), mode=("until",)):
    """trigger_target MODE under hybtrace --pid --multi --trigger send_order, started
    after it: (target, hybtrace, workload log path)."""
    log = os.path.join(control.dir, "workload.log")
    target = subprocess.Popen([TARGET] + list(mode),
                              env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
    ht = Attached(["--pid", str(target.pid), "--json", "--quiet", "--rq-delay", "off",
                   "--min-interval", "0ms", "--max-dumps", "1", "--output", control.dir,
                   "--multi", "--trigger", "send_order"] + list(extra))
    return target, ht, log


def armed_line(ht):
    return any(l.startswith("hybtrace: trigger send_order at ") and l.endswith(" armed")
               for l in ht.stderr().splitlines())


@test
def pid_target_that_exits_during_the_attach_keeps_its_hits():
    """The target calls send_order every 5 ms and exits once the trigger is armed and has
    made a few calls, while hybtrace still attaches (loads the monitor): what the
    breakpoints recorded is reported, as the workload's log says it was called."""
    need_root()
    need_breakpoints()
    for attempt in range(5):
        with Control(stop=True) as control:
            target, ht, log = pid_session(control)
            try:
                wait_for(lambda: ht.proc.poll() is not None or armed_line(ht), 30,
                         "the trigger armed")
                check(ht.proc.poll() is None, "hybtrace exited early:\n" + ht.describe())
                made = len(read_log(log))
                wait_for(lambda: len(read_log(log)) >= made + 2, 10, "two calls while armed")
                control.stop()
                target.wait(timeout=10)
                during_attach = ht.attached() is None
                rc = ht.wait(60)
            finally:
                if target.poll() is None:
                    target.kill()
                    target.wait()
                ht.close()
            calls = [e["args"] for e in read_log(log) if e["event"] == "call"]
        if during_attach:
            break
    check(during_attach, "hybtrace attached before its target could exit, 5 times")
    run = Run(rc, ht.stdout(), ht.stderr(), [])
    check(rc == 0 and run.summary(), run.describe())
    hits = [h["args"] for h in run.json_lines() if h.get("type") == "trigger"]
    check(len(hits) >= 2, "%d hits for the calls made while armed (%d calls in all)\n%s"
          % (len(hits), len(calls), run.describe()))
    # Every call from the first hit on is a hit: none dropped at the exit.
    check(hits[0] in calls and hits == calls[calls.index(hits[0]):],
          "hits %r, calls from the first hit on %r" % (hits, calls[-len(hits):]))
    triggers = run.summary()["triggers"]
    check(triggers["hits"] == len(hits) and triggers["lost"] == 0,
          "summary %r for %d hit lines" % (triggers, len(hits)))


@test
def hits_made_during_the_attach_are_reported_once_attached():
    """The target calls while hybtrace attaches, then is stopped (SIGSTOP) and calls no
    more: its hits are reported as soon as hybtrace is attached, not only at its exit (no
    new hit comes to wake hybtrace for them)."""
    need_root()
    need_breakpoints()
    with Control(stop=True) as control:
        target, ht, log = pid_session(control)
        try:
            wait_for(lambda: ht.proc.poll() is not None or armed_line(ht), 30,
                     "the trigger armed")
            made = len(read_log(log))
            wait_for(lambda: len(read_log(log)) >= made + 2, 10, "two calls while armed")
            os.kill(target.pid, signal.SIGSTOP)
            ht.wait_attached()
            calls = [e["args"] for e in read_log(log) if e["event"] == "call"]

            def reported():
                return [h["args"] for h in ht.json_lines() if h.get("type") == "trigger"]
            # Each hit is a line of its own: wait for the last call's, not for the first
            # line (under load the test read between two lines and saw one hit of four).
            wait_for(lambda: ht.proc.poll() is not None or calls[-1] in reported(), 10,
                     "the last call's hit reported while hybtrace runs")
            check(ht.proc.poll() is None, "hybtrace exited:\n" + ht.describe())
            hits = reported()
            check(hits[0] in calls and hits == calls[calls.index(hits[0]):],
                  "hits %r, the calls made before the target stopped %r" % (hits, calls))
        finally:
            os.kill(target.pid, signal.SIGCONT)
            control.stop()
            target.wait(timeout=10)
            ht.stop()
            ht.close()


@test
def pid_hits_and_breaches_count_from_one_zero():
    """--pid: the target calls send_order every 5 ms from before hybtrace starts, each call
    followed by a 5 ms sleep that breaches --syscall 1ms. Hits made while the monitor still
    loads are after the zero too (time_s >= 0), and hits and breaches give time_s from the
    same zero: a moment after hybtrace was started and before its first hit."""
    need_root()
    need_breakpoints()
    with Control(stop=True) as control:
        launched_ns = time.monotonic_ns()
        target, ht, log = pid_session(control, ["--syscall", "1ms", "--syscalls",
                                                "clock_nanosleep"])
        try:
            ht.wait_attached()
            wait_for(lambda: ht.proc.poll() is not None or len(ht.breaches()) >= 3, 20,
                     "breaches after the attach")
            control.stop()
            target.wait(timeout=10)
            rc = ht.wait(60)
        finally:
            if target.poll() is None:
                target.kill()
                target.wait()
            ht.close()
        calls = {tuple(e["args"]): e["ts_ns"] for e in read_log(log) if e["event"] == "call"}
    run = Run(rc, ht.stdout(), ht.stderr(), [])
    check(rc == 0, run.describe())
    hits = [o for o in run.json_lines() if o.get("type") == "trigger"]
    breaches = run.breaches("syscall")
    check(hits and breaches, "%d hits, %d breaches\n%s" % (len(hits), len(breaches),
                                                          run.describe()))
    for h in hits:
        check(tuple(h["args"]) in calls and h["time_ns"] >= calls[tuple(h["args"])],
              "a hit with %r at %d, not after a call that passed that" % (h["args"],
                                                                          h["time_ns"]))
    negative = [h["time_s"] for h in hits if h["time_s"] < 0]
    check(not negative, "%d of %d hits before the zero: time_s %r"
          % (len(negative), len(hits), negative[:5]))
    # time_s has 6 decimals: each line says its zero to the microsecond.
    zeros = [h["time_ns"] - round(h["time_s"] * 1e9) for h in hits] + \
        [b["end_ns"] - round(b["time_s"] * 1e9) for b in breaches]
    check(max(zeros) - min(zeros) <= 2000, "hits and breaches count from zeros %d ns apart"
          % (max(zeros) - min(zeros)))
    check(launched_ns <= min(zeros) <= hits[0]["time_ns"],
          "the zero %d, hybtrace started at %d, the first hit at %d"
          % (min(zeros), launched_ns, hits[0]["time_ns"]))


@test
def pid_trigger_waits_for_a_library_loaded_later():
    """--pid on a running target that loads libtrig.so with dlopen only after hybtrace
    attached: the spec waits for the module, as `run` does, then fires at each call."""
    need_root()
    need_breakpoints()
    lib = os.path.join(WORKLOADS, "libtrig.so")
    with Control(start=True) as control:
        log = os.path.join(control.dir, "workload.log")
        target = subprocess.Popen([TARGET, "dlopen", lib],
                                  env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
        wait_for(lambda: whole_lines(log), 10, "the target to start")
        ht = Attached(["--pid", str(target.pid), "--json", "--quiet", "--rq-delay", "off",
                       "--min-interval", "0ms", "--max-dumps", "1", "--output", control.dir,
                       "--multi", "--trigger", "libtrig.so:dl_order"])
        try:
            ht.wait_attached()
            waits = [l for l in ht.stderr().splitlines() if " waits: " in l]
            check(len(waits) == 1 and "no module libtrig.so is mapped" in waits[0],
                  "hybtrace said %r" % ht.stderr())
            run = run_answering(ht, Go(control, log), 60)
        finally:
            if target.poll() is None:
                target.kill()
            target.wait()
            ht.close()
    check(run.rc == 0, run.describe())
    hits = [o for o in run.json_lines() if o.get("type") == "trigger"]
    dlopened = run.events("dlopened")[0]["ts_ns"]
    calls = run.events("call")
    check(len(calls) == 2 and [h["args"] for h in hits] == [c["args"] for c in calls],
          "hits %r for the calls %r\n%s" % (hits, calls, run.describe()))
    check(all(h["function"] == "dl_order" and h["time_ns"] > dlopened for h in hits),
          "hits %r, dlopen at %d" % (hits, dlopened))


@test
def check_and_trigger_agree_with_the_kernel_on_breakpoints():
    """Whether hardware breakpoints fire here, as the kernel counts a breakpoint on libc's
    getppid for this test's own thread: `hybtrace check` says the same, and where they do
    not, --trigger says so at once, and in the summary, instead of waiting for hits that
    cannot come (the session goes on for its breaches)."""
    need_root()
    fires = breakpoints_fire()
    check(fires is not None, "cannot open a hardware breakpoint here to probe")
    p = subprocess.run([HYBTRACE, "check"], capture_output=True, text=True, timeout=120)
    row = [l.split() for l in p.stdout.splitlines() if l.strip().startswith("hardware breakpoints")]
    check(row and row[0][2] == ("yes" if fires else "no"),
          "the kernel %s a breakpoint's hits, check says %r\n%s"
          % ("counts" if fires else "counts none of", row, p.stdout))
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--trigger", "getppid", "--",
                    TARGET, "calls", "1"])
    check(run.rc == 0, run.describe())
    warned = "hardware breakpoints do not fire on this machine" in run.stderr
    check(warned != fires, "breakpoints %s here, hybtrace %s:\n%s" % (
        "fire" if fires else "do not fire", "warns" if warned else "does not warn",
        run.describe()))
    summary = run.summary()
    check(summary and summary["triggers"]["breakpoints_fire"] == fires,
          "summary %r" % (summary and summary.get("triggers")))
