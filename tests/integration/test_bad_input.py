# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Errors a user can cause: one clear line on stderr, exit 2, nothing left attached."""
import os
import shutil
import subprocess
import tempfile
import threading

from harness import HYBTRACE, Failure, cgroup_mounts, check, need_root, our_bpf_links, test
from services import SystemdUser


def expect_usage_error(args, needle, user=None, env=None, wrap=()):
    before = len(our_bpf_links())
    cmd = list(wrap) + [HYBTRACE] + args
    if user:
        cmd = ["setpriv", "--reuid=%d" % user, "--regid=%d" % user, "--clear-groups",
               "--inh-caps=-all"] + cmd
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                       env=dict(os.environ, **env) if env else None)
    err = p.stderr.strip()
    check(p.returncode == 2, "%r: rc %d, want 2\n%s" % (args, p.returncode, p.stderr))
    check(err and "\n" not in err, "%r: want one line on stderr, got:\n%s" % (args, p.stderr))
    check(needle.lower() in err.lower(), "%r: %r does not mention %r" % (args, err, needle))
    check(not p.stdout.strip(), "%r: nothing belongs on stdout:\n%s" % (args, p.stdout))
    check(len(our_bpf_links()) <= before, "%r left BPF links attached" % (args,))


@test
def bad_pids():
    need_root()
    expect_usage_error(["--pid", "abc"], "not a number")
    expect_usage_error(["--pid", "0"], "above 0")
    expect_usage_error(["--pid", "-5"], "above 0")
    expect_usage_error(["--pid", "4194304"], "no process")
    expect_usage_error(["--pid", "2"], "kernel thread")  # kthreadd
    expect_usage_error([], "--pid")


def dead_pid():
    """A pid whose process has exited and been reaped (and not been given out again)."""
    for _ in range(10):
        p = subprocess.Popen(["true"])
        p.wait()
        if not os.path.exists("/proc/%d" % p.pid):
            return p.pid
    raise Failure("every reaped pid was given out again at once")


@test
def bad_pid_lists():
    need_root()
    me = os.getpid()
    expect_usage_error(["--pid", "%d,%d" % (me, me)], "pid %d is named twice" % me)
    alive = threading.Event()
    tid = []
    t = threading.Thread(target=lambda: (tid.append(threading.get_native_id()), alive.wait()))
    t.start()
    try:
        while not tid:
            pass
        expect_usage_error(["--pid", "%d,%d" % (me, tid[0])],
                           "pid %d is a thread of process %d" % (tid[0], me))
        expect_usage_error(["--pid", "%d,%d" % (tid[0], me)],
                           "pid %d is a thread of process %d" % (tid[0], me))
    finally:
        alive.set()
        t.join()
    gone = dead_pid()
    expect_usage_error(["--pid", "%d,%d" % (me, gone)], "no process with pid %d" % gone)
    expect_usage_error(["--pid", "%d,2" % me], "pid 2 (kthreadd) is a kernel thread")
    expect_usage_error(["--pid", "%d,,2" % me], "empty pid")
    expect_usage_error(["run", "--pid", "2", "--", "true"], "kernel thread")


@test
def bad_cgroups():
    need_root()
    v2 = cgroup_mounts("cgroup2")
    if not v2:
        raise Failure("no cgroup v2 mount")
    expect_usage_error(["--cgroup", "hybtrace-no-such-cgroup"], "does not exist")
    expect_usage_error(["--cgroup", "/"], "use --all")
    expect_usage_error(["--cgroup", v2[0]], "use --all")
    expect_usage_error(["--cgroup", "/tmp"], "not a cgroup v2 directory")
    expect_usage_error(["--cgroup", ".."], "outside the cgroup v2 mount")
    expect_usage_error(["run", "--cgroup", "hybtrace-no-such-cgroup", "--", "true"],
                       "does not exist")
    for v1 in cgroup_mounts("cgroup")[:1]:
        expect_usage_error(["--cgroup", v1], "cgroup v1")


@test
def bad_units():
    need_root()
    if not os.path.exists("/run/systemd/system"):
        expect_usage_error(["--unit", "nginx"], "systemd is not running")
    v2 = cgroup_mounts("cgroup2")[0]
    empty = os.path.join(v2, "hybtrace-test-empty-%d" % os.getpid())
    os.mkdir(empty)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            fake = os.path.join(tmp, "systemctl")
            env = {"HYBTRACE_TEST_SYSTEMCTL": fake}

            def systemctl_shows(text):
                with open(fake, "w") as f:
                    f.write("#!/bin/sh\nprintf '%s'\n" % text)
                os.chmod(fake, 0o755)

            systemctl_shows("LoadState=not-found\\nActiveState=inactive\\nControlGroup=\\n")
            expect_usage_error(["--unit", "nosuch"], "nosuch.service is not loaded", env=env)
            systemctl_shows("LoadState=loaded\\nActiveState=inactive\\nControlGroup=\\n")
            expect_usage_error(["--unit", "stopped"], "has no processes", env=env)
            systemctl_shows("LoadState=loaded\\nActiveState=active\\nControlGroup=/%s\\n"
                            % os.path.basename(empty))
            expect_usage_error(["--unit", "idle.service"], "has no processes", env=env)
    finally:
        os.rmdir(empty)


@test
def bad_units_of_a_real_systemd():
    """--unit against a real systemd's answers (services.SystemdUser): a unit it does not
    know, one loaded but stopped, and a oneshot that stays active after its process exited."""
    need_root()
    systemd = SystemdUser(prefix="hybtrace-bad-unit")
    try:
        where = {"env": systemd.env(), "wrap": systemd.wrap()}
        expect_usage_error(["--unit", "hybtrace-no-such"],
                           "hybtrace-no-such.service is not loaded (LoadState=not-found)",
                           **where)
        systemd.add_unit("hybtrace-stopped", ["ExecStart=/bin/sleep 1000"])
        expect_usage_error(["--unit", "hybtrace-stopped.service"],
                           "has no processes (ActiveState=inactive", **where)
        systemd.add_unit("hybtrace-done", ["Type=oneshot", "RemainAfterExit=yes",
                                           "ExecStart=/bin/true"])
        systemd.systemctl("start", "hybtrace-done")
        check(systemd.show("hybtrace-done", "ActiveState")["ActiveState"] == "active",
              "the oneshot is not active after its start")
        expect_usage_error(["--unit", "hybtrace-done"], "has no processes (ActiveState=active",
                           **where)
    finally:
        systemd.close()


@test
def bad_target_combinations():
    need_root()
    me = str(os.getpid())
    expect_usage_error(["--quiet"], "which process? give --pid N, --cgroup PATH")
    expect_usage_error(["--all", "--pid", me], "stands alone")
    expect_usage_error(["--all", "--cgroup", "x"], "stands alone")
    expect_usage_error(["--all", "--children"], "stands alone")
    expect_usage_error(["run", "--all", "--", "true"], "stands alone")
    expect_usage_error(["--cgroup", "x", "--unit", "y"], "give one")
    expect_usage_error(["--pid", me, "--children", "--no-children"], "give one")
    expect_usage_error(["--cgroup", "x", "--cgroup", "y"], "--cgroup given twice")


@test
def bad_durations():
    need_root()
    for dur in ["-1ms", "5parsecs", "", "ms"]:
        expect_usage_error(["--pid", str(os.getpid()), "--rq-delay", dur], "duration")
    expect_usage_error(["--pid", str(os.getpid()), "--off-cpu", "0ms"], "above 0")


@test
def bad_options():
    need_root()
    expect_usage_error(["--pid", str(os.getpid()), "--frobnicate"], "--frobnicate")
    expect_usage_error(["--pid", str(os.getpid()), "--syscall", "1ms", "--syscalls",
                        "read,nosuchcall"], "nosuchcall")
    expect_usage_error(["--pid", str(os.getpid()), "--syscalls", "read"], "--syscall")
    expect_usage_error(["run"], "command")
    expect_usage_error(["frobnicate"], "unknown command")
    expect_usage_error(["--pid", str(os.getpid()), "--max-dumps-per-process", "0"],
                       "--max-dumps 0")
    expect_usage_error(["--pid", str(os.getpid()), "--max-dumps-per-process", "one"],
                       "not a count")


@test
def repeated_options():
    need_root()
    me = str(os.getpid())
    expect_usage_error(["--pid", me, "--pid", "1"], "--pid given twice")
    expect_usage_error(["--pid", me, "--rq-delay", "1ms", "--rq-delay", "2ms"],
                       "--rq-delay given twice")
    expect_usage_error(["--pid", me, "--pre", "1ms", "--pre", "2ms"], "--pre given twice")
    expect_usage_error(["run", "--json", "--json=x.json", "--", "true"], "--json given twice")


@test
def bad_breach_filters():
    need_root()
    me = str(os.getpid())
    off_cpu = ["--pid", me, "--off-cpu", "10ms"]
    expect_usage_error(off_cpu + ["--off-cpu-states", "S,W"], "unknown state 'W'")
    expect_usage_error(off_cpu + ["--off-cpu-states", "R"], "not an off-CPU state")
    expect_usage_error(off_cpu + ["--off-cpu-syscalls", "futex,nosuchcall"], "nosuchcall")
    expect_usage_error(off_cpu + ["--ignore-syscalls", "epoll_wiat"], "epoll_wiat")
    expect_usage_error(off_cpu + ["--off-cpu-states", "S", "--off-cpu-states", "D"],
                       "--off-cpu-states given twice")
    expect_usage_error(off_cpu + ["--ignore-syscalls", "poll", "--ignore-syscalls", "ppoll"],
                       "--ignore-syscalls given twice")
    expect_usage_error(["--pid", me, "--off-cpu-states", "D"], "--off-cpu DUR")


@test
def bad_json_file():
    need_root()
    me = str(os.getpid())
    with tempfile.TemporaryDirectory() as tmp:
        victim = os.path.join(tmp, "victim")
        with open(victim, "w") as f:
            f.write("keep me\n")
        link = os.path.join(tmp, "link.json")
        os.symlink(victim, link)
        expect_usage_error(["--pid", me, "--json=" + link], "symbolic link")
        check(open(victim).read() == "keep me\n", "the link's target was written")
        expect_usage_error(["--pid", me, "--json=" + os.path.join(tmp, "no", "x.json")],
                           "cannot create")
        expect_usage_error(["--pid", me, "--json", os.path.join(tmp, "x.json")], "--json=")
        # A session that fails to start leaves no JSON file behind.
        made = os.path.join(tmp, "made.json")
        expect_usage_error(["--pid", me, "--json=" + made, "--btf", "/nonexistent/vmlinux"],
                           "CONFIG_DEBUG_INFO_BTF")
        check(not os.path.exists(made), "a JSON file was left by a session that never began")


@test
def bad_btf():
    need_root()
    expect_usage_error(["--pid", str(os.getpid()), "--btf", "/nonexistent/vmlinux"],
                       "CONFIG_DEBUG_INFO_BTF")
    with tempfile.NamedTemporaryFile("w", suffix=".btf") as f:
        f.write("this is not BTF\n")
        f.flush()
        expect_usage_error(["--pid", str(os.getpid()), "--btf", f.name], "not a BTF file")


@test
def unprivileged_user_is_told_the_missing_capability():
    need_root()
    if not shutil.which("setpriv"):
        raise Failure("setpriv (util-linux) is missing")
    target = subprocess.Popen(["sleep", "10"])
    try:
        expect_usage_error(["--pid", str(target.pid)], "CAP_BPF", user=65534)
    finally:
        target.kill()
        target.wait()


@test
def pid_that_exits_during_attach():
    need_root()
    before = len(our_bpf_links())
    for _ in range(5):
        target = subprocess.Popen(["sleep", "0.05"])
        p = subprocess.run([HYBTRACE, "--pid", str(target.pid), "--quiet"],
                           capture_output=True, text=True, timeout=30)
        target.wait()
        check(p.returncode in (0, 2), "rc %d\n%s" % (p.returncode, p.stderr))
        if p.returncode == 2:
            check(p.stderr.strip().count("\n") == 0, "want one line:\n" + p.stderr)
    check(len(our_bpf_links()) <= before, "BPF links left attached")


@test
def help_version_check():
    p = subprocess.run([HYBTRACE, "--help"], capture_output=True, text=True)
    check(p.returncode == 0 and "--rq-delay" in p.stdout, "--help:\n" + p.stdout)
    p = subprocess.run([HYBTRACE, "--version"], capture_output=True, text=True)
    check(p.returncode == 0 and p.stdout.startswith("hybtrace "), "--version: " + p.stdout)
    need_root()
    p = subprocess.run([HYBTRACE, "check"], capture_output=True, text=True, timeout=60)
    check(p.returncode == 0, "check failed:\n" + p.stdout + p.stderr)
    for needle in ["kernel BTF", "prev_state", "ring buffer", "task storage",
                   "hardware breakpoints", "intel_pt", "syscall tracepoints", "will use"]:
        check(needle in p.stdout, "check does not mention %r:\n%s" % (needle, p.stdout))




@test
def bpf_link_count_fails_when_bpftool_does():
    # The checks above count links through bpftool: a bpftool that fails or prints what is
    # not JSON must fail them, not read as "no links, nothing left attached".
    with tempfile.TemporaryDirectory() as tmp:
        fake = os.path.join(tmp, "bpftool")
        path = os.environ["PATH"]
        os.environ["PATH"] = tmp + os.pathsep + path
        try:
            for script in ("echo 'Error: can not get next link' >&2; exit 255",
                           "echo 'not json'"):
                with open(fake, "w") as f:
                    f.write("#!/bin/sh\n%s\n" % script)
                os.chmod(fake, 0o755)
                try:
                    links = our_bpf_links()
                except Failure as e:
                    check("bpftool" in str(e), "the failure does not name bpftool: %s" % e)
                else:
                    raise Failure("bpftool doing %r read as %r" % (script, links))
        finally:
            os.environ["PATH"] = path
