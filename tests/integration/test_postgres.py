# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The acceptance check of the dump policy on a real service: postgres under pgbench with
synchronous commit. A throwaway cluster in a temporary directory (a Unix socket there, no
TCP), one backend watched while pgbench runs; the dumps left at the end must be of its
worst waits, and each must hold that wait as Perfetto reads it."""
import os
import pwd
import re
import shutil
import signal
import subprocess
import tempfile
import time

from harness import (Attached, Cgroup, Failure, NoTool, Skip, check, need_root, report_json,
                     test, tp_query, trace_processor, wait_for)
from services import (Hog, alive, check_named_hog,
                      check_service_breaches, check_service_dumps, children_of, describe,
                      need_service_targets, pinned)

# Debian's postgresql-15 (make deps installs it) holds all four.
PG_BIN = "/usr/lib/postgresql/15/bin"
PG_USER = "postgres"
CLIENTS = 4
BENCH_S = 12
MIN_INTERVAL_S = 1
MAX_DUMPS = 3
# Thresholds that differ by kind, so that ranking by the ratio to the threshold and by the
# duration disagree: one wait in a syscall ranks by its off-CPU part (d / 1ms > d / 2ms).
# Low enough that a fast disk's commits and a quiet machine still make waits in several
# intervals (on a 2-CPU guest: 570-670 breaches in 12 s, 5-6 dumps written).
THRESHOLDS = ["--rq-delay", "500us", "--off-cpu", "1ms", "--syscall", "2ms"]
# A breach is offered to the dump policy when hybtrace reads it, a little after its end; an
# interval (--min-interval) is timed from the offer of its first breach.
OFFER_LAG_NS = 250_000_000
# How far a wait's slices in a dump may lie from the breach's bounds (clock reads apart).
EDGE_NS = 50_000
# A woken thread's run-queue wait is timed from its enqueue (the kernel's run_delay), its
# native thread state from its sched_waking (as ftrace's): a wakeup of a task on an idle CPU
# is queued there after the IPI, hundreds of microseconds later on this guest, at most the
# delay a flight record carries (HT_FR_WAKE_DELAY_MAX_US, include/hybtrace/records.h).
MAX_WAKE_DELAY_NS = 0xffff * 1000


def need_postgres():
    missing = [n for n in ("initdb", "postgres", "pg_ctl", "pgbench")
               if not os.access(os.path.join(PG_BIN, n), os.X_OK)]
    if missing:
        raise Skip("postgres is not installed (%s missing in %s; make deps installs "
                   "postgresql-15)" % (", ".join(missing), PG_BIN))
    try:
        pwd.getpwnam(PG_USER)
    except KeyError:
        raise Skip("no %s user to run postgres as (postgresql-15 makes it)" % PG_USER)


def as_postgres(args):
    """ARGS run as the postgres user: setpriv execs, so a Popen's pid is the program's."""
    return ["setpriv", "--reuid", PG_USER, "--regid", PG_USER, "--init-groups", "--"] + args


class Cluster:
    """A postgres cluster in a temporary directory, reachable only on its Unix socket there.
    close() stops it (pg_ctl stop -m immediate) and kills whatever of it is left, on every
    path."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="hybtrace-pg-")
        os.chmod(self.dir, 0o755)  # the postgres user reaches its directories through it
        self.data = os.path.join(self.dir, "data")
        self.sock = os.path.join(self.dir, "sock")
        for d in (self.data, self.sock):
            os.mkdir(d, 0o700)
            shutil.chown(d, PG_USER, PG_USER)
        self.log_path = os.path.join(self.dir, "postgres.log")
        self.postmaster = None  # its Popen, when the test started it
        self.pid = None  # the postmaster's pid, from postmaster.pid
        self.env = dict(os.environ, PGHOST=self.sock, PGUSER=PG_USER, PGDATABASE=PG_USER,
                        HOME=self.dir)

    def run(self, args, timeout):
        p = subprocess.run(as_postgres(args), capture_output=True, text=True, timeout=timeout,
                           cwd=self.dir, env=self.env)
        check(p.returncode == 0, "%s exited with %d:\n%s%s" % (
            " ".join(args[:2]), p.returncode, p.stdout[-2000:], p.stderr[-2000:]))
        return p.stdout

    def init(self):
        """initdb, once."""
        if not os.path.exists(os.path.join(self.data, "PG_VERSION")):
            self.run([os.path.join(PG_BIN, "initdb"), "-D", self.data, "-U", PG_USER, "-A",
                      "trust", "--no-sync", "--no-instructions", "--locale=C", "-E", "UTF8"],
                     120)

    def command(self):
        """The postmaster's command line, as the postgres user."""
        return as_postgres([
            os.path.join(PG_BIN, "postgres"), "-D", self.data,
            "-c", "listen_addresses=", "-c", "unix_socket_directories=" + self.sock,
            "-c", "synchronous_commit=on", "-c", "fsync=on", "-c", "shared_buffers=16MB",
            "-c", "max_connections=20"])

    def start(self, prefix=(), preexec_fn=None):
        """initdb if not done yet, then the postmaster (PREFIX before its command, e.g.
        taskset), until it takes clients."""
        self.init()
        with open(self.log_path, "a") as log:
            self.postmaster = subprocess.Popen(list(prefix) + self.command(), stdout=log,
                                               stderr=subprocess.STDOUT, cwd=self.dir,
                                               preexec_fn=preexec_fn)
        self.wait_ready(self.postmaster)

    def wait_ready(self, proc):
        """Until the postmaster takes clients; PROC is what exits if it fails (its Popen,
        or hybtrace's under run). Its pid, from postmaster.pid, is self.pid."""
        # postmaster.pid's 8th line is the postmaster's status; "ready" once it takes clients.
        pid_file = os.path.join(self.data, "postmaster.pid")

        def ready():
            check(proc.poll() is None, "postgres exited with %s:\n%s"
                  % (proc.returncode, self.log()))
            try:
                with open(pid_file) as f:
                    lines = f.read().splitlines()
            except OSError:
                return False
            if len(lines) < 8 or lines[7].strip() != "ready":
                return False
            self.pid = int(lines[0])
            return True

        wait_for(ready, 60, "postgres to accept connections\n" + self.log())
        return self.pid

    def log(self):
        try:
            with open(self.log_path) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def logged_pids(self, text=None):
        """The pids of the processes that wrote to the log (TEXT, else its file): the
        default log_line_prefix, "%m [%p] ", names each line's process. The startup
        process, forked and gone before the postmaster takes clients, says it there."""
        if text is None:
            try:
                with open(self.log_path) as f:
                    text = f.read()
            except OSError:
                text = ""
        return {int(m) for m in re.findall(r" \[(\d+)\] [A-Z]+: ", text)}

    def children(self):
        """(pid, cmdline) of the postmaster's children: its backends and helpers."""
        return children_of(self.pid) if self.pid else []

    def backends(self):
        """The pids of client backends (pgbench's connections)."""
        return sorted(pid for pid, cmd in self.children()
                      if cmd.startswith("postgres: %s %s [local]" % (PG_USER, PG_USER)))

    def stop(self, mode="immediate"):
        """pg_ctl stop -m MODE ("fast": a clean end, exit status 0), until the postmaster
        and its children are gone (those left are killed)."""
        if not self.pid:
            return
        left = [pid for pid, _ in self.children()]
        if alive(self.pid):
            try:
                subprocess.run(as_postgres([os.path.join(PG_BIN, "pg_ctl"), "stop", "-D",
                                            self.data, "-m", mode, "-w", "-t", "20"]),
                               capture_output=True, timeout=30, cwd=self.dir)
            except subprocess.TimeoutExpired:
                pass
        if self.postmaster:
            try:
                self.postmaster.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.postmaster.kill()
                self.postmaster.wait()
        else:
            try:
                wait_for(lambda: not alive(self.pid), 10, "postgres to stop")
            except Failure:
                os.kill(self.pid, signal.SIGKILL)
        # Backends leave when the postmaster dies; any that lingers goes now.
        for pid in left:
            if alive(pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.postmaster = self.pid = None

    def close(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def kill_process(p):
    if p and p.poll() is None:
        p.kill()
        p.wait()


def ratio(b):
    """A breach's badness as the dump policy ranks it: its duration over its threshold, the
    largest when one breach carries several kinds (each with its own duration and
    threshold)."""
    best = b["duration_ns"] / b["threshold_ns"]
    # The live line gives the off-CPU part of a wait of two kinds in "off_cpu".
    off = b.get("off_cpu")
    if isinstance(off, dict) and off.get("threshold_ns"):
        best = max(best, off["duration_ns"] / off["threshold_ns"])
    for k in b.get("kinds") or []:
        if isinstance(k, dict) and k.get("threshold_ns"):
            best = max(best, k["duration_ns"] / k["threshold_ns"])
    return best


def rank(b):
    """Waits for new work (`wait_for_work`, where hybtrace labels them) rank below every
    other breach; then the ratio."""
    return (0 if b.get("wait_for_work") else 1, ratio(b))


def waits_of(b):
    """(kind, start, end, own) for each kind a breach carries: its own kind and bounds, and
    those of `kinds` where one wait breached several thresholds; OWN is false where a kind
    has no bounds of its own and is judged by the breach's."""
    out = [(b["kind"], b["start_ns"], b["end_ns"], True)]
    off = b.get("off_cpu")
    if isinstance(off, dict) and "start_ns" in off and b["kind"] != "off-cpu":
        out.append(("off-cpu", off["start_ns"], off["end_ns"], True))
    for k in b.get("kinds") or []:
        if isinstance(k, dict):
            name, own = k.get("kind"), "start_ns" in k and "end_ns" in k
            lo, hi = (k["start_ns"], k["end_ns"]) if own else (b["start_ns"], b["end_ns"])
        else:
            name, lo, hi, own = k, b["start_ns"], b["end_ns"], False
        if name and name not in [w[0] for w in out]:
            out.append((name, lo, hi, own))
    return out


def describe_breach(b):
    return "%s %.2f ms (%.2fx) tid %d in %s state %s ending %d" % (
        b["kind"], b["duration_ns"] / 1e6, ratio(b), b["tid"], b.get("syscall"),
        b.get("state"), b["end_ns"])


def wait_in_dump(path, b):
    """The breached thread's wait, as Perfetto reads the dump: the breach slice over its
    bounds, its syscall's slice on the thread's own tracks, and its thread states (blocked,
    then runnable) covering them."""
    start, end = b["start_ns"], b["end_ns"]
    rows = tp_query(path, "select s.ts, s.dur, a.int_value as tid from slice s join args a "
                    "using (arg_set_id) where s.name = 'breach' and s.dur > 0 and "
                    "a.key = 'debug.tid'")
    check([(r["ts"], r["ts"] + r["dur"], r["tid"]) for r in rows] == [(start, end, b["tid"])],
          "%s: the breach slices %r, the breach %s" % (path, rows, describe_breach(b)))
    waits = waits_of(b)
    lo, hi = min(w[1] for w in waits), max(w[2] for w in waits)
    slices = tp_query(path, "select s.ts, s.dur, s.name, s.category from slice s "
                      "join thread_track tt on tt.id = s.track_id join thread t using (utid) "
                      "where t.tid = %d and s.category = 'syscall' and s.dur > 0 "
                      "and s.ts < %d and s.ts + s.dur > %d order by s.ts" % (b["tid"], hi, lo))
    # Its waits are Perfetto's own thread states, from the dump's native scheduling data.
    states = tp_query(path, "select ts.ts, ts.dur, ts.state from thread_state ts join thread t "
                      "using (utid) where t.tid = %d and ts.ts < %d and "
                      "(ts.dur < 0 or ts.ts + ts.dur > %d) order by ts.ts" % (b["tid"], hi, lo))
    wakings = [r["ts"] for r in tp_query(
        path, "select r.ts from ftrace_event r join args a using (arg_set_id) where "
        "r.name = 'sched_waking' and a.key = 'pid' and a.int_value = %d and r.ts >= %d "
        "and r.ts <= %d" % (b["tid"], lo - MAX_WAKE_DELAY_NS, lo + EDGE_NS))]

    def end_of(s):
        return s["ts"] + s["dur"] if s["dur"] >= 0 else hi

    def begins_wait(s, lo, runnable, edge):
        """Whether state S begins the wait from LO: at LO, or (runnable) at the sched_waking
        that queued the thread at LO, the last before it."""
        if s["state"] == "Running" or (s["state"] in ("R", "R+")) != runnable:
            return False
        if abs(s["ts"] - lo) <= edge:
            return True
        return runnable and bool(wakings) and s["ts"] == max(wakings) and end_of(s) > lo

    def covered(lo, hi, runnable, edge):
        """A state of the kind asked (runnable: R or R+; else blocked) begins at LO, and it
        and the waiting states after it (off-CPU, then run queue) run without a gap to HI."""
        firsts = [s for s in states if begins_wait(s, lo, runnable, edge)]
        if not firsts:
            return False
        reach = end_of(firsts[0])
        for s in states:
            if s["ts"] <= firsts[0]["ts"] or s["ts"] > hi:
                continue
            if s["ts"] > reach + EDGE_NS or (s["state"] == "Running" and s["ts"] < hi - edge):
                return False
            reach = max(reach, end_of(s))
        return reach >= hi - edge

    for kind, lo, hi, own in waits:
        # A kind judged by another kind's bounds (a syscall's enter, its off-CPU part's
        # switch-out) may begin or end a little apart from them.
        edge = EDGE_NS if own else EDGE_NS + (hi - lo) // 10
        if kind == "syscall":
            ok = any(s["category"] == "syscall" and s["name"] == b.get("syscall") and
                     abs(s["ts"] - lo) <= edge and abs(s["ts"] + s["dur"] - hi) <= edge
                     for s in slices)
        elif kind == "off-cpu":
            ok = covered(lo, hi, False, edge)
        elif kind == "rq-delay":
            ok = covered(lo, hi, True, edge)
        else:
            raise Failure("a breach of kind %r: %r" % (kind, b))
        check(ok, "%s: no %s wait of tid %d over [%d, %d] (%s); its syscalls: %r, its thread "
              "states: %r" % (path, kind, b["tid"], lo, hi, describe_breach(b), slices, states))


def epoll_sets(pid):
    """PID's epoll sets, by descriptor: whether each watches a socket (its fdinfo's "tfd:"
    lines, each watched descriptor's link), as the kernel says while PID lives."""
    sets = {}
    for name in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, name)) != "anon_inode:[eventpoll]":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, name)) as f:
                watched = [int(line.split()[1]) for line in f if line.startswith("tfd:")]
            sets[int(name)] = any(os.readlink("/proc/%d/fd/%d" % (pid, fd)).startswith(
                "socket:") for fd in watched)
        except FileNotFoundError:
            continue  # closed meanwhile
    check(sets, "backend %d has no epoll set" % pid)
    return sets


@test
def postgres_dumps_are_its_worst_waits():
    """pgbench (4 clients, synchronous commit, fsync) against a throwaway cluster; hybtrace
    watches one backend with --min-interval 1s --max-dumps 3. The dumps left are the 3 worst
    intervals' worst breaches: the session's worst breach is among them, and no breach left
    out is worse than the least bad kept unless a kept one at least as bad ended within its
    interval (an interval's worst wins it; a later worse one replaces the least bad)."""
    need_root()
    need_postgres()
    cluster = Cluster()
    bench = ht = None
    try:
        cluster.start()
        cluster.run([os.path.join(PG_BIN, "pgbench"), "-i", "-s", "1", "-q"], 120)
        # Backends of pgbench -i may still be on their way out.
        before = set(cluster.backends())
        # -n: no vacuum first, so that its connection is not taken for a client's.
        bench = subprocess.Popen(as_postgres([os.path.join(PG_BIN, "pgbench"), "-n", "-c",
                                              str(CLIENTS), "-j", "2", "-T", str(BENCH_S)]),
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 cwd=cluster.dir, env=cluster.env)
        seen = []

        def connected():
            seen[:] = [pid for pid in cluster.backends() if pid not in before]
            return bench.poll() is not None or len(seen) >= CLIENTS

        wait_for(connected, 30, "pgbench's %d connections" % CLIENTS)
        check(bench.poll() is None and len(seen) >= CLIENTS,
              "pgbench exited with %s, backends %r:\n%s"
              % (bench.returncode, seen, bench.stdout.read()[-2000:]
                 if bench.poll() is not None else ""))
        backend = seen[0]
        out = os.path.join(cluster.dir, "dumps")
        os.mkdir(out)
        # hybtrace stops when the backend exits: when pgbench is done.
        ht = Attached(["--pid", str(backend), "--json", "--quiet", "--output", out,
                       "--min-interval", "%ds" % MIN_INTERVAL_S, "--max-dumps",
                       str(MAX_DUMPS)] + THRESHOLDS)
        attached_at = time.monotonic()
        ht.wait_attached(30)
        attach_s = time.monotonic() - attached_at
        sets = epoll_sets(backend)
        bench_out, _ = bench.communicate(timeout=BENCH_S + 60)
        check(bench.returncode == 0, "pgbench exited with %d:\n%s"
              % (bench.returncode, bench_out[-2000:]))
        rc = ht.wait(60)
        check(rc == 0, "hybtrace:\n" + ht.describe())
        ht.close()
        tps = re.search(r"tps = ([0-9.]+)", bench_out)

        lines = ht.json_lines()
        breaches = [o for o in lines if o.get("type") == "breach"]
        written = [o for o in lines if o.get("type") == "dump"]
        replaced = [o for o in lines if o.get("type") == "dump_replaced"]
        s = ht.summary()
        check(s is not None, "no summary:\n" + ht.describe())
        d = s["dumps"]
        check(all(b["tid"] == backend for b in breaches),
              "breaches of other threads than the backend %d" % backend)
        # Only a session that reached --max-dumps tests which dumps are kept.
        check(d["policy"] == "worst" and d["failed"] == 0 and
              (len(written) > MAX_DUMPS or d["skipped"]["max_dumps"] > 0),
              "the run wrote %d dumps (%r) of %d breaches; it must reach --max-dumps %d, "
              "none failed %r\n%s" % (len(written), d, len(breaches), MAX_DUMPS,
                                      [l for l in ht.stderr().splitlines() if "failed" in l],
                                      ht.describe()))

        # The files left: exactly the kept ones, each the dump of a breach of the stream.
        files = sorted(os.path.join(out, n) for n in os.listdir(out)
                       if n.endswith(".perfetto-trace"))
        gone = {o["old"] for o in replaced}
        check(len(files) == MAX_DUMPS == d["kept"] and
              d["written"] == len(written) and d["replaced"] == len(replaced) ==
              len(written) - MAX_DUMPS,
              "files %r, summary %r, %d dump lines, %d replaced" % (files, d, len(written),
                                                                  len(replaced)))
        check(sorted({o["path"] for o in written} - gone) == files,
              "the dump lines less the replaced %r, the files %r"
              % (sorted({o["path"] for o in written} - gone), files))
        for o in replaced:
            check(o["removed"] and not os.path.exists(o["old"]) and
                  o["old_ratio"] < o["new_ratio"], "a replacement %r" % o)
        # A dump of one wait of two kinds is named by both ("off-cpu+syscall"), its breach
        # line by its main kind with the two in "kinds".
        by_bounds = {(b["tid"], "+".join(sorted(k if isinstance(k, str) else k["kind"]
                                                for k in b.get("kinds") or [b["kind"]])),
                      b["start_ns"], b["end_ns"]): b for b in breaches}
        kept = []
        for path in files:
            r = report_json(path)
            b = by_bounds.get((r["tid"], r["kind"], r["start_ns"], r["end_ns"]))
            check(b is not None, "%s is of no breach the stream reported: %r" % (path, r))
            kept.append((path, b))

        # The session's worst breach can lose no interval and be no dump's victim.
        worst = max(breaches, key=rank)
        check(any(rank(b) >= rank(worst) for _, b in kept), "the worst breach, %s, was not kept; kept: %s"
              % (describe_breach(worst), "; ".join(describe_breach(b) for _, b in kept)))
        # Every breach worse than the least bad kept lost its interval to a kept one at least
        # as bad. An interval lasts --min-interval from its first breach's offer; one whose
        # choice waited for the builder (busy) goes on until the builder took it.
        least = min(rank(b) for _, b in kept)
        reach_ns = MIN_INTERVAL_S * 1_000_000_000 * (2 if d["skipped"]["busy"] else 1) + \
            OFFER_LAG_NS
        kept_ids = {id(b) for _, b in kept}
        for x in breaches:
            if id(x) in kept_ids or rank(x) <= least:
                continue
            check(any(rank(b) >= rank(x) and abs(b["end_ns"] - x["end_ns"]) <= reach_ns
                      for _, b in kept),
                  "%s is worse than the least bad dump kept (%.2fx) and no dump kept beat it "
                  "in its interval; kept: %s" % (describe_breach(x), least[1], "; ".join(
                      describe_breach(b) for _, b in kept)))

        # In epoll_wait a backend waits for its client (the set holding its socket) or on
        # its latch alone (a lock wait: another backend sets it). A wait pgbench ended was
        # in the client's set. The client's set is a wait for work whoever ended the wait
        # (another backend's signal does, a sinval catch-up under load); the latch's is not.
        def epoll_woken_by(prefix):
            return [b for b in breaches if "epoll_fd" in b and b["kind"] != "rq-delay"
                    and (b.get("woken_by") or {}).get("source") == "task"
                    and b["woken_by"].get("pid") != backend
                    and (b["woken_by"].get("comm") or "").startswith(prefix)]
        by_pgbench, by_postgres = epoll_woken_by("pgbench"), epoll_woken_by("postgres")
        client_sets = {fd for fd, socket in sets.items() if socket}
        check({b["epoll_fd"] for b in by_pgbench} <= client_sets,
              "pgbench ended epoll waits on %r; the backend's sets with a socket: %r (all: %r)"
              % (sorted({b["epoll_fd"] for b in by_pgbench}), sorted(client_sets), sets))
        client_waits = [b for b in by_pgbench + by_postgres if b["epoll_fd"] in client_sets]
        latch_waits = [b for b in by_postgres if b["epoll_fd"] not in client_sets]
        check(all(not b["wait_for_work"] for b in latch_waits) and
              all(b["wait_for_work"] for b in client_waits),
              "latch waits labelled for work: %s; client waits not: %s (the backend's epoll "
              "sets, with a socket or not: %r)" % (
                  "; ".join(describe_breach(b) for b in latch_waits if b["wait_for_work"]),
                  "; ".join(describe_breach(b) for b in client_waits if not b["wait_for_work"]),
                  sets))

        # Each dump's line gives the ratio the policy ranked it by: its breach's.
        for path, b in kept:
            line = [o for o in written if o["path"] == path][0]
            check(abs(line["ratio"] - ratio(b)) < 0.001,
                  "%s: dumped as %.3fx, its breach is %s" % (path, line["ratio"],
                                                             describe_breach(b)))

        # Each dump holds its breach's wait, as Perfetto's own importer reads it.
        try:
            trace_processor()
        except NoTool as e:
            raise NoTool("the dumps kept are the worst (%d breaches, %d dumps written); "
                         "reading them: %s" % (len(breaches), len(written), e))
        for path, b in kept:
            wait_in_dump(path, b)
        print("    postgres: %s tps, backend %d watched %.1f s after a %.1f s attach: "
              "%d breaches (%d latch waits, %d client waits in epoll by their sets, %d of "
              "these ended by another backend), %d dumps written, %d replaced, skipped %r; "
              "kept: %s"
              % (tps.group(1) if tps else "?", backend, s["seconds"], attach_s,
                 len(breaches), len(latch_waits), len(client_waits),
                 len([b for b in client_waits if b in by_postgres]), len(written),
                 len(replaced), d["skipped"],
                 "; ".join(describe_breach(b) for _, b in kept)))
    finally:
        kill_process(bench)
        if ht:
            ht.close()
        cluster.close()


SERVICE_LOAD_S = 3
# Run-queue waits alone: postgres shares CPU 0 with the hog, pgbench runs on CPU 1.
SERVICE_OPTIONS = ["--json", "--quiet", "--rq-delay", "500us", "--max-dumps", "2",
                   "--min-interval", "500ms"]


def postgres_watched(cluster, mode, tmp):
    """The cluster (postmaster and all it forks on CPU 0, beside a hog pinned there) under
    pgbench (CPU 1), watched as MODE says: "cgroup", "pid" (--pid POSTMASTER --children:
    pgbench's connections, made after attach, fork the backends) or "run"."""
    out = os.path.join(tmp, "dumps-" + mode)
    os.mkdir(out)
    opts = SERVICE_OPTIONS + ["--output", out]
    hog = ht = cg = bench = postmaster = None
    before = {}
    seen = {}
    try:
        hog = Hog(0, os.path.join(tmp, "hog-%s.log" % mode))
        if mode == "cgroup":
            cg = Cgroup(prefix="hybtrace-pg")
            cluster.start(pinned(0), preexec_fn=cg.join)
            ht = Attached(["--cgroup", cg.path] + opts)
            ht.wait_attached(30)
        elif mode == "pid":
            cluster.start(pinned(0))
            # Its helpers (checkpointer, walwriter...) run before attach: not targets.
            before = dict(cluster.children())
            ht = Attached(["--pid", str(cluster.pid), "--children"] + opts)
            ht.wait_attached(30)
        else:
            ht = Attached(["run"] + opts + ["--"] + pinned(0) + cluster.command(),
                          cwd=cluster.dir)
            ht.wait_attached(30)
            cluster.wait_ready(ht.proc)
        postmaster = cluster.pid
        bench = subprocess.Popen(pinned(1) + as_postgres([
            os.path.join(PG_BIN, "pgbench"), "-n", "-c", str(CLIENTS), "-j", "2", "-T",
            str(SERVICE_LOAD_S)]), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, cwd=cluster.dir, env=cluster.env)
        # The postmaster's children as /proc lists them while pgbench runs (ps's view).
        # A process that is exiting reads as an empty command line: what was seen of it
        # before stays.
        def look():
            seen.update((pid, cmd) for pid, cmd in cluster.children()
                        if cmd or pid not in seen)
            return bench.poll() is not None
        wait_for(look, SERVICE_LOAD_S + 60, "pgbench to end")
        bench_out = bench.stdout.read()
        check(bench.returncode == 0, "pgbench exited with %d:\n%s"
              % (bench.returncode, bench_out[-2000:]))
        if mode == "run":
            # hybtrace ends with its command, with its exit status: a clean stop's 0.
            cluster.stop("fast")
            rc = ht.wait(60)
        else:
            rc = ht.stop()
        check(rc == 0, "hybtrace:\n" + ht.describe())
        ht.close()
    finally:
        kill_process(bench)
        if ht:
            ht.close()
        cluster.stop()
        if hog:
            hog.close()
        if cg:
            cg.remove()
    targets = [o for o in ht.json_lines() if o.get("type") == "attached"][0]["targets"]
    if mode == "cgroup":
        check(targets["cgroup"] and targets["cgroup"].endswith(cg.name),
              "targets %r, not the cgroup %s" % (targets, cg.path))
    else:
        check(targets["pids"] == [postmaster] and targets["children"] is True,
              "targets %r, want the postmaster %d and its children" % (targets, postmaster))
    inside = {postmaster: "the postmaster"}
    inside.update({pid: cmd for pid, cmd in seen.items() if pid not in before})
    if mode == "run":
        # Its log went to hybtrace's stderr, with the pid of each process that wrote it.
        inside.update({pid: "a postgres process that logged" for pid in
                       cluster.logged_pids(ht.stderr()) if pid not in inside})
    outside = {hog.pid: "the hog (pf_hog)", bench.pid: "pgbench"}
    outside.update({pid: "%s (running before attach)" % cmd for pid, cmd in before.items()})
    backends = sorted(pid for pid, cmd in seen.items() if "[local]" in cmd)
    check(len(backends) >= CLIENTS, "pgbench's %d backends not seen: %r" % (CLIENTS, seen))
    breaches = ht.breaches()
    # A child the postmaster forks and reaps between two of the test's looks (an autovacuum
    # worker, a connection's short life) is the service's too: a postgres process born after
    # the postmaster (a system cluster's, started before, has lower pids) and not outside.
    inside.update({b["pid"]: "a short-lived postgres process" for b in breaches
                   if b["pid"] not in inside and b["pid"] not in outside
                   and b.get("process_comm") == "postgres" and b["pid"] > postmaster})
    # Under run the postmaster is named by taskset and setpriv, which exec it, until it runs.
    names = ("postgres", "taskset", "setpriv") if mode == "run" else ("postgres",)
    check_service_breaches(breaches, inside, outside, names, ht.describe)
    breached = {b["pid"] for b in breaches if b["pid"] in backends}
    check(len(breached) >= 2, "breaches of %d of the %d backends %r: %s" % (
        len(breached), len(backends), backends, "; ".join(describe(b) for b in breaches[:10])))
    named = check_named_hog(breaches, set(backends), hog.pid, "backends")
    ndumps = check_service_dumps(out, breaches, inside)
    tps = re.search(r"tps = ([0-9.]+)", bench_out)
    print("    %s: postmaster %d, backends %r; %s tps; %d breaches (%d backends, %d waits "
          "behind the hog), %d dumps" % (
              mode, postmaster, backends, tps.group(1) if tps else "?", len(breaches),
              len(breached), len(named), ndumps))


@test
def postgres_watched_three_ways():
    """postgres under pgbench beside a pinned hog, watched by its cgroup, by its
    postmaster's pid with --children (each new connection's backend a target) and under
    run: the breaches are of its backends (as /proc lists the postmaster's children), none
    of the hog, pgbench or, under --pid, the helpers running before attach."""
    need_root()
    need_postgres()
    need_service_targets()
    cluster = Cluster()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            cluster.start()
            cluster.run([os.path.join(PG_BIN, "pgbench"), "-i", "-s", "1", "-q"], 120)
            cluster.stop("fast")
            for mode in ("cgroup", "pid", "run"):
                postgres_watched(cluster, mode, tmp)
    finally:
        cluster.close()
