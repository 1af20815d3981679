# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Privileges: what is missing is named; after setup only what monitoring needs is kept."""
import os
import shutil
import subprocess
import tempfile

from harness import (HYBTRACE, Attached, Failure, check, hybtrace, need_root, test, wait_for,
                     workload)

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

