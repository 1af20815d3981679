# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Privileges: what is missing is named; after setup only what monitoring needs is kept."""
import os
import shutil
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Control, Failure, Go, check, check_rows, hybtrace,
                     need_breakpoints, need_root, read_log, run_answering, test, wait_for,
                     whole_lines, workload)

CAP = {"CAP_CHOWN": 0, "CAP_DAC_OVERRIDE": 1, "CAP_DAC_READ_SEARCH": 2, "CAP_FOWNER": 3,
       "CAP_KILL": 5, "CAP_SETUID": 7, "CAP_SETPCAP": 8, "CAP_NET_ADMIN": 12,
       "CAP_IPC_LOCK": 14, "CAP_SYS_MODULE": 16, "CAP_SYS_RAWIO": 17, "CAP_SYS_PTRACE": 19,
       "CAP_SYS_ADMIN": 21, "CAP_SYS_NICE": 23, "CAP_SYSLOG": 34, "CAP_PERFMON": 38,
       "CAP_BPF": 39, "CAP_CHECKPOINT_RESTORE": 40}
NOT_KEPT = ["CAP_SETUID", "CAP_SETPCAP", "CAP_NET_ADMIN", "CAP_SYS_MODULE", "CAP_SYS_RAWIO",
            "CAP_SYS_ADMIN", "CAP_SYSLOG", "CAP_BPF"]
KEPT = ["CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_CHECKPOINT_RESTORE", "CAP_CHOWN",
        "CAP_DAC_OVERRIDE", "CAP_IPC_LOCK"]


def cap_sets(pid):
    """Effective and bounding sets of every thread of PID."""
    out = []
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/status" % (pid, tid)) as f:
            fields = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
        out.append((int(tid), int(fields["CapEff"], 16), int(fields["CapBnd"], 16)))
    return out


@test
def capabilities_are_dropped_after_setup():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        target = subprocess.Popen([workload("sleeper"), "30", "300"],
                                  env=dict(os.environ, HT_WORKLOAD_LOG=os.devnull))
        ht = Attached(["--pid", str(target.pid), "--json", "--syscall", "20ms", "--off-cpu",
                       "20ms", "--min-interval", "0ms", "--quiet", "--output", out])
        try:
            ht.wait_attached()
            wait_for(lambda: len(ht.breaches()) >= 2, 20, "breaches")
            threads = cap_sets(ht.pid)
            check(len(threads) >= 2, "want the event loop and the dump thread: %r" % threads)
            for tid, eff, bnd in threads:
                for name in NOT_KEPT:
                    check(not eff & (1 << CAP[name]), "thread %d still has %s" % (tid, name))
                    check(not bnd & (1 << CAP[name]), "%s is still in the bounding set" % name)
                for name in KEPT:
                    check(eff & (1 << CAP[name]), "thread %d lost %s" % (tid, name))
            # Without CAP_BPF and CAP_SYSLOG, monitoring and dumps go on, with kernel symbols.
            wait_for(lambda: len([o for o in ht.json_lines() if o.get("type") == "dump"]) >= 2,
                     20, "dumps after the drop")
            check(ht.stop() == 0, ht.describe())
        finally:
            target.kill()
            target.wait()
            ht.close()
        stacks = " ".join(" ".join(b.get("kernel_stack", [])) for b in ht.breaches())
        check("nanosleep" in stacks, "kernel stacks lack symbols: %s" % stacks[:300])


def _as_nobody(cmd):
    return ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
            "--inh-caps=-all"] + cmd


@test
def another_users_process_needs_cap_sys_ptrace():
    need_root()
    if not shutil.which("capsh") or not shutil.which("setpriv"):
        raise Failure("capsh (libcap2-bin) or setpriv (util-linux) is missing")
    target = subprocess.Popen(_as_nobody(["sleep", "30"]))
    try:
        wait_for(lambda: open("/proc/%d/status" % target.pid).read().count("65534") >= 4, 10,
                 "the target to become nobody")
        # Root without CAP_SYS_PTRACE (and CAP_SYS_ADMIN, which would stand in for it).
        p = subprocess.run(["capsh", "--drop=cap_sys_ptrace,cap_sys_admin", "--",
                            "-c", "%s --pid %d --duration 1s" % (HYBTRACE, target.pid)],
                           capture_output=True, text=True, timeout=30)
        err = p.stderr.strip()
        check(p.returncode == 2, "rc %d, want 2: %s" % (p.returncode, err))
        check("CAP_SYS_PTRACE" in err and "\n" not in err, "stderr %r" % err)
        # With it, the same process is watched.
        p = subprocess.run([HYBTRACE, "--pid", str(target.pid), "--duration", "300ms",
                            "--quiet"], capture_output=True, text=True, timeout=30)
        check(p.returncode == 0, "as root: rc %d %s" % (p.returncode, p.stderr))
    finally:
        target.kill()
        target.wait()


@test
def missing_cap_bpf_or_perfmon_is_named():
    need_root()
    if not shutil.which("capsh"):
        raise Failure("capsh (libcap2-bin) is missing")
    for drop, name in [("cap_bpf,cap_sys_admin", "CAP_BPF"),
                       ("cap_perfmon,cap_sys_admin", "CAP_PERFMON")]:
        p = subprocess.run(["capsh", "--drop=" + drop, "--", "-c",
                            "%s run -- true" % HYBTRACE],
                           capture_output=True, text=True, timeout=30)
        err = p.stderr.strip()
        check(p.returncode == 2 and name in err and "\n" not in err,
              "without %s: rc %d %r" % (name, p.returncode, err))



PARANOID = "/proc/sys/kernel/perf_event_paranoid"
WITHOUT_CAPS = workload("without_caps")
EACCES = 13


class Paranoid:
    """kernel.perf_event_paranoid at LEVEL for a while; as it was afterwards."""

    def __init__(self, level):
        self.level = level
        with open(PARANOID) as f:
            self.was = f.read().strip()

    def __enter__(self):
        with open(PARANOID, "w") as f:
            f.write(str(self.level))
        return self

    def __exit__(self, *exc):
        with open(PARANOID, "w") as f:
            f.write(self.was)


def perf_refused_without(caps, env=None):
    """Whether this kernel refuses a perf event to a process without CAPS, as
    without_caps finds out for itself (the ground truth hybtrace must agree with)."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "log")
        p = subprocess.run([WITHOUT_CAPS, "--probe-only", caps, "true"], timeout=30,
                           env=dict(os.environ, HT_WORKLOAD_LOG=log))
        check(p.returncode == 0, "without_caps failed")
        return read_log(log)[0]["errno"] == EACCES


@test
def check_says_what_perf_events_need_at_each_paranoid_level():
    """`hybtrace check` with and without CAP_SYS_ADMIN, at perf_event_paranoid 2 and 3,
    says perf events work exactly where the kernel opens one for a process with the same
    capabilities (Debian's kernels at 3 refuse it without CAP_SYS_ADMIN; this one does
    not), and names what they need."""
    need_root()
    for level in (2, 3):
        with Paranoid(level):
            for caps, prefix in [("", []), ("cap_sys_admin", [WITHOUT_CAPS, "cap_sys_admin"])]:
                refused = caps and perf_refused_without(caps)
                p = subprocess.run(prefix + [HYBTRACE, "check"], capture_output=True,
                                   text=True, timeout=60,
                                   env=dict(os.environ, HT_WORKLOAD_LOG=os.devnull))
                rows = check_rows(p.stdout)
                what = "paranoid %d%s" % (level, ", without " + caps if caps else "")
                check({"privileges", "perf events"} <= set(rows), "%s: %s" % (what, p.stdout))
                want = "no" if refused else "yes"
                check(rows["perf events"][0] == want and rows["privileges"][0] == want,
                      "%s, the kernel %s a perf event: check says %r"
                      % (what, "refuses" if refused else "opens", rows))
                check("kernel.perf_event_paranoid %d" % level in rows["perf events"][1],
                      "%s: %r" % (what, rows["perf events"]))
                check("CAP_SYS_ADMIN" in rows["perf events"][1] or not refused,
                      "%s: %r" % (what, rows["perf events"]))
                check((p.returncode == 0) == (want == "yes"), "%s: rc %d" % (what, p.returncode))


@test
def triggers_at_paranoid_3_keep_cap_sys_admin_only_where_the_kernel_asks_it():
    """At perf_event_paranoid 3, a --pid target that execs after the attach has its new
    image's function armed (perf events opened after the capability drop), and hybtrace
    holds CAP_SYS_ADMIN then only if this kernel refuses perf events without it, saying so
    in one line."""
    need_root()
    need_breakpoints()
    with Paranoid(3), Control(start=True) as control:
        refused = perf_refused_without("cap_sys_admin")
        log = os.path.join(control.dir, "workload.log")
        target = subprocess.Popen([workload("trigger_target"), "exec"],
                                  env=dict(os.environ, HT_WORKLOAD_LOG=log, **control.env))
        wait_for(lambda: whole_lines(log), 10, "the target to start")
        ht = Attached(["--pid", str(target.pid), "--json", "--quiet", "--rq-delay", "off",
                       "--output", control.dir, "--multi", "--trigger", "send_order"])
        try:
            ht.wait_attached()
            held = all(eff & (1 << CAP["CAP_SYS_ADMIN"]) for _, eff, _ in cap_sets(ht.pid))
            run = run_answering(ht, Go(control, log), 60)
        finally:
            if target.poll() is None:
                target.kill()
            target.wait()
            ht.close()
    said = [l for l in run.stderr.splitlines() if "keeps it after attaching" in l]
    check(held == refused and len(said) == int(refused),
          "the kernel %s perf events without CAP_SYS_ADMIN; hybtrace %s it, and said %r"
          % ("refuses" if refused else "opens", "held" if held else "dropped", said))
    hits = [o["args"] for o in run.json_lines() if o.get("type") == "trigger"]
    calls = [e["args"] for e in run.events("call")]
    check(run.rc == 0 and len(calls) == 2 and hits == calls,
          "hits %r for the new image's calls %r\n%s" % (hits, calls, run.describe()))


@test
def triggers_without_cap_sys_admin_at_paranoid_3_fire_or_fail_at_once():
    """Without CAP_SYS_ADMIN at perf_event_paranoid 3: where the kernel then refuses perf
    events (Debian's), hybtrace says so in one line and exits 2 before anything starts;
    where it does not (mainline), the trigger fires in the image it execs."""
    need_root()
    need_breakpoints()
    with Paranoid(3), Control(start=True) as control:
        refused = perf_refused_without("cap_sys_admin")
        log = os.path.join(control.dir, "workload.log")
        ht = Attached(["run", "--json", "--rq-delay", "off", "--output", control.dir,
                       "--trigger", "send_order", "--", workload("trigger_target"), "calls",
                       "1"], env=dict(HT_WORKLOAD_LOG=log, **control.env),
                      wrap=[WITHOUT_CAPS, "cap_sys_admin"])
        run = run_answering(ht, Go(control, log), 60)
    hits = [o for o in run.json_lines() if o.get("type") == "trigger"]
    calls = run.events("call")
    if refused:
        err = run.stderr.strip()
        check(run.rc == 2 and "\n" not in err and "CAP_SYS_ADMIN" in err and
              "perf_event_paranoid" in err, "refused: rc %d, %r" % (run.rc, err))
        check(not calls and not run.stdout, "something ran:\n" + run.describe())
    else:
        check(run.rc == 0 and len(hits) == 1 and hits[0]["args"] == calls[0]["args"],
              "the kernel opens perf events without CAP_SYS_ADMIN, and the trigger did not "
              "fire:\n" + run.describe())
