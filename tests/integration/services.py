# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Real multi-process servers from Debian for the acceptance checks (issue 17) and the
bench: nginx with a master and workers on a private configuration, the processes of a
server as /proc lists them, a CPU hog pinned beside them, an HTTP load, and a real
systemd to run them as units."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile

from harness import (Skip, check, cgroup_mounts, hybtrace_knows, need_root, read_log,
                     remove_cgroup_tree, tp_query, trace_processor, wait_for, workload)

# Debian's nginx package (make deps installs it).
NGINX = "/usr/sbin/nginx"


def children_of(ppid):
    """(pid, cmdline) of the processes whose parent is PPID."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name) as f:
                if int(f.read().rsplit(")", 1)[1].split()[1]) != ppid:
                    continue
            with open("/proc/%s/cmdline" % name, "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError, IndexError):
            continue
        out.append((int(name), cmd))
    return out


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def free_port():
    """A TCP port on 127.0.0.1 no one listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cpu):
    """A command prefix that runs a program on CPU alone (taskset execs it: same pid)."""
    return ["taskset", "-c", str(cpu)]


def need_nginx():
    if not os.access(NGINX, os.X_OK):
        raise Skip("nginx is not installed (%s missing; make deps installs nginx)" % NGINX)


CONFIG = """\
daemon off;
master_process on;
worker_processes %(workers)d;
user www-data;
pid %(dir)s/nginx.pid;
error_log %(dir)s/error.log info;
events { worker_connections 512; }
http {
    access_log off;
    client_body_temp_path %(dir)s/body;
    proxy_temp_path %(dir)s/proxy;
    fastcgi_temp_path %(dir)s/fastcgi;
    uwsgi_temp_path %(dir)s/uwsgi;
    scgi_temp_path %(dir)s/scgi;
    keepalive_requests 100000000;
    server {
        # reuseport: a listening socket per worker, so that every worker gets connections.
        listen 127.0.0.1:%(port)d reuseport;
        location / { return 200 "ok\\n"; }
    }
}
"""


class Nginx:
    """nginx on a private configuration in a temporary directory: its own port, pid file
    and error log, in the foreground (daemon off) with a master and WORKERS workers.
    close() stops it and whatever of it is left."""

    def __init__(self, workers=4):
        self.dir = tempfile.mkdtemp(prefix="hybtrace-nginx-")
        os.chmod(self.dir, 0o755)
        self.workers_wanted = workers
        self.port = free_port()
        self.conf = os.path.join(self.dir, "nginx.conf")
        self.pid_file = os.path.join(self.dir, "nginx.pid")
        self.error_log = os.path.join(self.dir, "error.log")
        with open(self.conf, "w") as f:
            f.write(CONFIG % {"workers": workers, "dir": self.dir, "port": self.port})
        self.proc = None
        self.master = None
        self.seen = set()  # every nginx process seen, for close()

    def command(self):
        """The command that runs it (-e: the error log before the configuration is read)."""
        return [NGINX, "-p", self.dir + "/", "-c", self.conf, "-e", self.error_log]

    def start(self, prefix=(), preexec_fn=None):
        self.proc = subprocess.Popen(list(prefix) + self.command(), preexec_fn=preexec_fn,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return self.proc

    def log(self):
        try:
            with open(self.error_log) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def read_master(self):
        """The master's pid as nginx's pid file says; None before it is written."""
        try:
            with open(self.pid_file) as f:
                return int(f.read().strip())
        except (OSError, ValueError):
            return None

    def workers(self):
        """The master's workers that take requests (not those shutting down after a reload),
        as /proc lists them (ps's view)."""
        if not self.master:
            return []
        out = sorted(pid for pid, cmd in children_of(self.master)
                     if cmd == "nginx: worker process")
        self.seen.update(out)
        return out

    def wait_ready(self, timeout_s=30, exclude=(), proc=None):
        """Until the pid file names the master, WORKERS workers not in EXCLUDE run and the
        port answers. PROC: what exits if it fails to start (its Popen, or hybtrace's)."""
        proc = proc or self.proc

        def ready():
            check(proc is None or proc.poll() is None, "nginx exited with %r:\n%s"
                  % (proc.returncode if proc else None, self.log()))
            self.master = self.read_master()
            if not self.master:
                return False
            self.seen.add(self.master)
            if len([w for w in self.workers() if w not in exclude]) != self.workers_wanted:
                return False
            with socket.socket() as s:
                return s.connect_ex(("127.0.0.1", self.port)) == 0

        wait_for(ready, timeout_s, "nginx to start its %d workers\n%s"
                 % (self.workers_wanted, self.log()))
        return self.master

    def reload(self, timeout_s=30):
        """nginx -s reload: the master forks new workers and the old ones quit. Returns
        the new workers once they all run."""
        old = set(self.workers())
        subprocess.run(self.command() + ["-s", "reload"], check=True, timeout=30,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.wait_ready(timeout_s, exclude=old)
        return [w for w in self.workers() if w not in old]

    def stop(self, timeout_s=30):
        """SIGQUIT to the master: a graceful end; exit status 0."""
        master = self.master or self.read_master()
        if master and alive(master):
            os.kill(master, signal.SIGQUIT)
        if self.proc:
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        else:
            wait_for(lambda: not alive(master), timeout_s, "nginx to stop")

    def close(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.seen:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.dir, ignore_errors=True)


class Hog:
    """prefork's hog ("pf_hog"): a process that spins pinned to CPU until stopped (at most
    LIMIT_S), started once it says it is pinned; it logs to LOG."""

    def __init__(self, cpu, log, limit_s=120):
        self.stop_file = log + ".stop"
        self.proc = subprocess.Popen(
            [workload("prefork"), "hog", str(cpu), str(limit_s * 1000)],
            env=dict(os.environ, HT_WORKLOAD_LOG=log, HT_STOP_FILE=self.stop_file))
        self.pid = self.proc.pid
        try:
            wait_for(lambda: self.proc.poll() is not None or any(
                e["event"] == "hog_start" for e in read_log(log)), 10, "the hog to pin itself")
            check(self.proc.poll() is None, "the hog exited with %r" % self.proc.returncode)
        except BaseException:
            self.close()
            raise

    def close(self):
        open(self.stop_file, "w").close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def http_load(port, connections, seconds, cpu, log, env=None):
    """http_load against 127.0.0.1:PORT for SECONDS, its threads on CPU (-1: anywhere):
    its "done" line (requests, per_s, reconnects, errors)."""
    p = subprocess.run([workload("http_load"), str(port), str(connections), str(seconds),
                        str(cpu)], env=dict(os.environ, HT_WORKLOAD_LOG=log, **(env or {})),
                       timeout=seconds + 60, capture_output=True, text=True)
    check(p.returncode == 0, "http_load exited with %d: %s" % (p.returncode, p.stderr[-2000:]))
    done = [e for e in read_log(log) if e["event"] == "done"]
    check(done, "http_load did not log its end")
    return done[-1]


def need_service_targets():
    need_root()
    for option in ("--children", "--cgroup"):
        if not hybtrace_knows(option):
            raise Skip("hybtrace has no %s (issue 17's targets)" % option)
    cpus = os.sched_getaffinity(0)
    if not {0, 1} <= cpus:
        raise Skip("needs CPUs 0 and 1")


def describe(b):
    return "%s %.2f ms pid %d tid %d (%s)" % (b["kind"], b["duration_ns"] / 1e6, b["pid"],
                                              b["tid"], b.get("comm"))


def check_service_breaches(breaches, inside, outside, names, describe_run):
    """Every breach is of a process in INSIDE (pid -> what it is), none of OUTSIDE's;
    each names its process as one of NAMES."""
    check(breaches, "no breach at all\n" + describe_run())
    for b in breaches:
        check(b["pid"] not in outside, "a breach of %s, outside the target set: %s"
              % (outside.get(b["pid"]), describe(b)))
        check(b["pid"] in inside, "a breach of pid %d (%s), none of the service's %r: %s"
              % (b["pid"], b.get("process_comm"), sorted(inside), describe(b)))
        check(b.get("process_comm") in names, "pid %d is named %r, not one of %r"
              % (b["pid"], b.get("process_comm"), names))


def check_named_hog(breaches, pids, hog_pid, what):
    """Some run-queue wait of PIDS names the hog as what ran instead."""
    named = [b for b in breaches if b["pid"] in pids and b["kind"] == "rq-delay" and
             any(c["pid"] == hog_pid for c in b.get("ran_instead") or [])]
    check(named, "no run-queue wait of the %s names the hog %d as what ran instead: %s"
          % (what, hog_pid, "; ".join(describe(b) for b in breaches[:10])))
    return named


def check_service_dumps(out, breaches, inside):
    """Each dump opens in Perfetto's importer; its breach is of a thread of INSIDE, which
    the dump holds, and (one track group per process) that thread's process is its own."""
    paths = sorted(os.path.join(out, n) for n in os.listdir(out)
                   if n.endswith(".perfetto-trace"))
    check(paths, "no dump written")
    trace_processor()
    tids = {b["tid"]: b["pid"] for b in breaches}
    for path in paths:
        rows = tp_query(path, "select a.int_value as tid from slice s join args a "
                        "using (arg_set_id) where s.name = 'breach' and s.dur > 0 "
                        "and a.key = 'debug.tid'")
        check(len(rows) == 1 and rows[0]["tid"] in tids,
              "%s: its breach %r is of no thread a breach line named" % (path, rows))
        tid = rows[0]["tid"]
        pid = tids[tid]
        check(pid in inside, "%s: the breach of tid %d, pid %d, is outside the service"
              % (path, tid, pid))
        threads = tp_query(path, "select t.tid, p.pid from thread t left join process p "
                           "using (upid) where t.tid = %d" % tid)
        check(threads, "%s: no thread %d (pid %d, %s) in the dump" % (path, tid, pid,
                                                                     inside[pid]))
        check([r["pid"] for r in threads] == [pid],
              "%s: thread %d is of process %r in the dump, not %d"
              % (path, tid, [r["pid"] for r in threads], pid))
    return len(paths)


# Debian's systemd package (make deps installs it; it need not be the init system).
SYSTEMD = "/lib/systemd/systemd"
SYSTEMCTL = "/usr/bin/systemctl"


class SystemdUser:
    """A real systemd service manager for units a test defines, where systemd is not the
    init system (this machine, CI): root's user manager (systemd --user), in a cgroup of
    its own under every cgroup hierarchy systemd uses (cgroup v2, and name=systemd on a
    hybrid machine), and in a mount namespace of its own, where a tmpfs /run holds
    /run/systemd/system, the mark by which systemd and hybtrace know that systemd runs.
    Its units' cgroups are real cgroups under the v2 mount. Commands that must see systemd
    run (hybtrace --unit) run in that namespace (wrap()); `systemctl` there is the real
    one, pointed at this manager (`--user`, env()). close() stops it and removes its
    cgroups."""

    def __init__(self, prefix="hybtrace-systemd"):
        need_root()
        for path in (SYSTEMD, SYSTEMCTL):
            if not os.access(path, os.X_OK):
                raise Skip("systemd is not installed (%s missing; make deps installs "
                           "systemd)" % path)
        self.dir = tempfile.mkdtemp(prefix=prefix + "-")
        self.runtime = os.path.join(self.dir, "run")
        self.units = os.path.join(self.dir, "config", "systemd", "user")
        self.bin = os.path.join(self.dir, "bin")
        for d in (self.runtime, self.units, self.bin):
            os.makedirs(d, mode=0o700)
        with open(os.path.join(self.bin, "systemctl"), "w") as f:
            f.write("#!/bin/sh\nexec %s --user \"$@\"\n" % SYSTEMCTL)
        os.chmod(os.path.join(self.bin, "systemctl"), 0o755)
        self.name = "%s-%d" % (prefix, os.getpid())
        # Each hierarchy systemd keeps its tree in: cgroup v2, and name=systemd beside it.
        self.cgroups = [os.path.join(m, self.name) for m in cgroup_mounts("cgroup2") +
                        [m for m in cgroup_mounts("cgroup") if m.endswith("/systemd")]]
        for d in self.cgroups:
            os.mkdir(d)
        self.log = os.path.join(self.dir, "systemd.log")
        join = " ".join("echo $$ > %s/cgroup.procs;" % d for d in self.cgroups)
        script = ("set -e; mount -t tmpfs hybtrace-systemd-run /run; "
                  "mkdir -p /run/systemd/system; %s exec %s --user" % (join, SYSTEMD))
        try:
            with open(self.log, "w") as log:
                self.proc = subprocess.Popen(
                    ["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                    env=self.env(), stdout=log, stderr=subprocess.STDOUT,
                    start_new_session=True)
            wait_for(lambda: self.proc.poll() is not None or self.running(), 30,
                     "systemd --user to start")
            check(self.proc.poll() is None, "systemd --user exited with %s:\n%s"
                  % (self.proc.returncode, self.read_log()))
        except BaseException:
            self.close()
            raise

    def env(self):
        """The environment under which systemctl --user finds this manager."""
        return dict(os.environ, XDG_RUNTIME_DIR=self.runtime,
                    XDG_CONFIG_HOME=os.path.join(self.dir, "config"),
                    PATH=self.bin + ":" + os.environ.get("PATH", "/usr/bin:/bin"))

    def wrap(self):
        """A command prefix that runs a program where systemd is seen to run (its mount
        namespace), with this manager's systemctl first on PATH (env())."""
        return ["nsenter", "--target", str(self.proc.pid), "--mount", "--"]

    def read_log(self):
        with open(self.log, errors="replace") as f:
            return f.read()[-2000:]

    def systemctl(self, *args, check_rc=True):
        p = subprocess.run([SYSTEMCTL, "--user"] + list(args), env=self.env(),
                           capture_output=True, text=True, timeout=60)
        check(not check_rc or p.returncode == 0, "systemctl --user %s: %d %s\n%s"
              % (" ".join(args), p.returncode, p.stderr, self.read_log()))
        return p

    def running(self):
        return os.path.exists(os.path.join(self.runtime, "systemd", "private")) and \
            self.systemctl("show", "-p", "Version", check_rc=False).returncode == 0

    def add_unit(self, name, service):
        """Define NAME.service with SERVICE, its [Service] section's lines."""
        with open(os.path.join(self.units, name + ".service"), "w") as f:
            f.write("[Service]\n" + "".join(line + "\n" for line in service))
        self.systemctl("daemon-reload")

    def show(self, unit, *props):
        out = self.systemctl("show", "-p", ",".join(props), "--", unit).stdout
        return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)

    def close(self):
        if getattr(self, "proc", None) and self.proc.poll() is None:
            self.systemctl("exit", check_rc=False)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        for top in getattr(self, "cgroups", []):
            # What a unit left behind goes first, then the tree.
            kill = os.path.join(top, "cgroup.kill")
            if os.path.exists(kill):
                with open(kill, "w") as f:
                    f.write("1\n")
            remove_cgroup_tree(top)
        shutil.rmtree(self.dir, ignore_errors=True)
