# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The kernel monitor, for real: breaches of each kind against workloads' ground truth."""
import os
import re
import subprocess
import tempfile
import time

from harness import (HYBTRACE, Attached, Failure, check, hybtrace, need_root, our_bpf_links,
                     read_log, test, tolerance_ns, wait_for, workload)


def within(breach, lo_ns, hi_ns):
    """The breach's interval lies inside [lo, hi] give or take the load tolerance."""
    tol = tolerance_ns(breach["duration_ns"])
    return breach["start_ns"] >= lo_ns - tol and breach["end_ns"] <= hi_ns + tol


def rq_delay_scenario(extra_args, env=None):
    run = hybtrace(["run", "--json", "--rq-delay", "500us"] + extra_args +
                   ["--", workload("rq_contention"), "0", "2000"], timeout=60, env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    start = run.events("contention_start")
    end = run.events("contention_end")
    check(start and end, "workload did not log its bounds\n" + run.describe())
    hog = start[0]["hog_pid"]
    victim = start[0]["tid"]
    # Waits that ended before the scenario began (exec's migration) are not its own.
    breaches = [b for b in run.breaches("rq-delay")
                if b["tid"] == victim and b["end_ns"] > start[0]["ts_ns"]]
    check(len(breaches) >= 10, "%d rq-delay breaches of the victim, want >= 10\n%s"
          % (len(breaches), run.describe()))
    named = 0
    for b in breaches:
        check(b["duration_ns"] >= 500_000, "breach under the threshold: %r" % b)
        check(within(b, start[0]["ts_ns"], end[0]["ts_ns"]),
              "breach outside the contention window: %r" % b)
        # Every nanosecond of the wait is charged to a task or marked unknown.
        charged = sum(c["ns"] for c in b["ran_instead"]) + b["ran_instead_other_ns"]
        check(abs(charged + b["ran_instead_unknown_ns"] - b["duration_ns"]) <= 10,
              "culprit times do not add up to the wait: %r" % b)
        # What cannot be charged is clock noise: a few us, never a share of the wait.
        check(b["ran_instead_unknown_ns"] <= max(10_000, b["duration_ns"] // 100),
              "unaccounted wait: %r" % b)
        if (hog, "rq_hog") in [(c["pid"], c["comm"]) for c in b["ran_instead"]]:
            named += 1
    # On a busy machine other tasks can hold the CPU too; the hog must dominate.
    check(named >= 10 and named >= len(breaches) * 0.9,
          "the hog %d was named in %d of %d breaches" % (hog, named, len(breaches)))
    return breaches


@test
def rq_delay_names_the_hog():
    need_root()
    rq_delay_scenario([])


@test
def rq_delay_from_task_storage_agrees():
    need_root()
    # Kernels without CONFIG_SCHED_INFO time run-queue waits in task storage.
    rq_delay_scenario([], env={"HYBTRACE_RQ_FROM_STORAGE": "1"})


@test
def rq_delay_pre_5_18_path_agrees():
    need_root()
    # The forced task_struct path must load and give the same kind of answers.
    rq_delay_scenario(["--prev-state", "task"])


# One thread slot for the whole target: every thread but one keeps its state in task storage.
SHARED_SLOTS = {"HYBTRACE_TEST_THREAD_SLOTS": "1"}


def off_cpu_scenario(how, extra_args, env=None):
    run = hybtrace(["run", "--json", "--off-cpu", "10ms"] + extra_args +
                   ["--", workload("offcpu_wake"), how, "20", "2"], timeout=60, env=env)
    check(run.rc == 0, "hybtrace failed\n" + run.describe())
    blocks = list(zip(run.events("block_start"), run.events("block_end"),
                      run.events("release")))
    check(len(blocks) == 2, "workload log incomplete\n" + run.describe())
    victim = blocks[0][0]["tid"]
    mine = [b for b in run.breaches("off-cpu") if b["tid"] == victim]
    breaches = []
    for start, end, release in blocks:
        # Under load the thread may also sleep elsewhere (pthread_join): match by bounds.
        b = [b for b in mine if within(b, start["ts_ns"], end["ts_ns"])]
        check(len(b) == 1, "want one off-cpu breach of tid %d in [%d, %d], got %d\n%s"
              % (victim, start["ts_ns"], end["ts_ns"], len(b), run.describe()))
        b = b[0]
        check(b["duration_ns"] >= 20_000_000, "off-cpu shorter than 20 ms: %r" % b)
        waker = b["woken_by"]
        check(waker and waker["source"] == "task" and waker["tid"] == release["tid"]
              and waker["comm"] == "releaser",
              "woken by %r, want releaser %d" % (waker, release["tid"]))
        check(b["state"] == "S", "state %r, want S" % b["state"])
        breaches.append(b)
    return breaches


@test
def off_cpu_futex_names_the_waker():
    need_root()
    breaches = off_cpu_scenario("futex", [])
    stack = " ".join(breaches[0]["kernel_stack"])
    check("futex" in stack, "kernel stack lacks futex: %s" % stack)


@test
def off_cpu_pipe_names_the_waker():
    need_root()
    breaches = off_cpu_scenario("pipe", [])
    stack = " ".join(breaches[0]["kernel_stack"])
    check("pipe_read" in stack or "vfs_read" in stack, "kernel stack lacks pipe read: %s" % stack)


@test
def off_cpu_with_shared_thread_slots_agrees():
    need_root()
    off_cpu_scenario("futex", [], env=SHARED_SLOTS)


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


def late_thread_scenario(env=None):
    run, breaches = syscall_scenario(["--off-cpu", "10ms", "--", workload("sleeper"), "15",
                                      "1", "late"], env=env)
    tid = breaches[0]["tid"]
    check(tid != breaches[0]["pid"], "the sleeper should be a new thread, not the main one")
    check(any(b["tid"] == tid for b in run.breaches("off-cpu")),
          "no off-cpu breach for the late thread\n" + run.describe())
    stack = " ".join(breaches[0]["kernel_stack"])
    check("nanosleep" in stack, "the syscall breach lacks the stack it slept on: %s" % stack)


@test
def thread_born_after_attach_is_followed():
    need_root()
    late_thread_scenario()


@test
def thread_born_after_attach_with_shared_thread_slots():
    need_root()
    # The main thread holds the only slot: the late thread lives in task storage.
    late_thread_scenario(env=SHARED_SLOTS)


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
    log = "/tmp/hybtrace-test-pidmode.log"
    if os.path.exists(log):
        os.unlink(log)
    env = dict(os.environ, HT_WORKLOAD_LOG=log, HT_START_DELAY_MS="1500")
    target = subprocess.Popen([workload("offcpu_wake"), "futex", "20", "1"], env=env)
    try:
        p = subprocess.Popen([HYBTRACE, "--pid", str(target.pid), "--off-cpu", "10ms",
                              "--json", "--output", tempfile.gettempdir()],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=30)
    finally:
        target.kill()
        target.wait()
    check(p.returncode == 0, "rc %d when the target exited\n%s" % (p.returncode, err))
    events = read_log(log)
    os.unlink(log)
    release = [e for e in events if e["event"] == "release"]
    check(release, "workload did not run")
    lines = [l for l in out.splitlines() if '"off-cpu"' in l and '"blocked"' in l]
    check(lines and ('"tid":%d' % release[0]["tid"]) in lines[0],
          "no off-cpu breach woken by the releaser:\n" + out)
    check('"type":"summary"' in out, "no summary at exit:\n" + out)


@test
def sigint_prints_summary_and_exits_zero():
    need_root()
    target = subprocess.Popen(["sleep", "30"])
    try:
        p = subprocess.Popen([HYBTRACE, "--pid", str(target.pid), "--output",
                              tempfile.gettempdir()], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        wait_for(lambda: _attached(p.pid), 15, "hybtrace to attach")
        time.sleep(0.3)
        p.send_signal(2)
        out, err = p.communicate(timeout=15)
    finally:
        target.kill()
        target.wait()
    check(p.returncode == 0, "rc %d after SIGINT\n%s" % (p.returncode, err))
    check("run-queue delay" in out and "lost:" in out, "no summary/histogram:\n" + out)


def _attached(pid):
    """Whether process PID holds BPF links yet (its fds include bpf-link)."""
    try:
        for fd in os.listdir("/proc/%d/fd" % pid):
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) == "anon_inode:bpf_link":
                return True
    except OSError:
        pass
    return False


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
