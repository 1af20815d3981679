# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Real multi-process servers from Debian for the acceptance checks (issue 17) and the
bench: nginx with a master and workers on a private configuration, the processes of a
server as /proc lists them, a CPU hog pinned beside them, an HTTP load."""
import os
import shutil
import signal
import socket
import subprocess
import tempfile

from harness import (Skip, check, hybtrace_knows, need_root, read_log, tp_query,
                     trace_processor, wait_for, workload)

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
