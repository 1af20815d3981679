# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Waits for work apart: an event loop idle in epoll_wait and a thread joining its own are
labelled and never dumped before a real breach; --off-cpu-states and --ignore-syscalls
leave breaches out in the kernel. Checked against the epoll_server workload's own log."""
import glob
import os
import tempfile

from harness import (Failure, NoTool, check, hybtrace, need_root, report_json, test, tp_query,
                     workload)

THRESHOLDS = ["--rq-delay", "off", "--off-cpu", "10ms", "--syscall", "10ms"]
# One interval for the whole workload (under a second): the dump is its worst breach.
ONE_INTERVAL = ["--max-dumps", "1", "--min-interval", "10s"]
# The workload's own exec, reading a freshly built binary from disk, may wait in D as long as
# the slow request: a breach of the command, not the one these tests look for.
NOT_EXEC = ["--ignore-syscalls", "execve"]
# 8 requests 40 ms apart, request 4 slow: its handler waits 25 ms for the client's mutex.
SERVER = [workload("epoll_server"), "8", "40", "4", "25"]
# The idle waits to look for: at least this long by the workload's clock.
IDLE_NS = 30_000_000
# The workload's clock reads bracket the syscall; the kernel's times lie within.
MARGIN_NS = 100_000


def spans(run, start, end, tid=None, **fields):
    """[(start_ns, end_ns)] of the workload's START ... END events (of TID, with FIELDS)."""
    out, open_at = [], {}
    for e in run.log:
        if tid is not None and e["tid"] != tid:
            continue
        if any(e.get(k) != v for k, v in fields.items()):
            continue
        if e["event"] == start:
            open_at[e["tid"]] = e["ts_ns"]
        elif e["event"] == end and e["tid"] in open_at:
            out.append((open_at.pop(e["tid"]), e["ts_ns"]))
    return out


def tid_of(run, event):
    found = run.events(event)
    check(len(found) == 1, "want one %s in the workload's log: %r" % (event, found))
    return found[0]["tid"]


def within(b, span):
    return span[0] - MARGIN_NS <= b["start_ns"] and b["end_ns"] <= span[1] + MARGIN_NS


def breaches_in(run, tid, span, kind=None):
    return [b for b in run.breaches(kind) if b["tid"] == tid and within(b, span)]


def long_idle_waits(run):
    """(tid, span) of each wait in epoll_wait for new work of IDLE_NS or more: the server's
    between requests and the client's pacing timer."""
    waits = [(tid_of(run, "server_start"), s) for s in spans(run, "idle_start", "idle_end")]
    waits += [(tid_of(run, "client_start"), s) for s in spans(run, "gap_start", "gap_end")]
    return [(tid, s) for tid, s in waits if s[1] - s[0] >= IDLE_NS]


def the_dump(out, run):
    dumps = sorted(glob.glob(os.path.join(out, "*.perfetto-trace")))
    check(len(dumps) == 1, "want one dump, got %r\n%s" % (dumps, run.describe()))
    return dumps[0]


def check_dump_is_the_slow_request(out, run):
    """The one dump is of the handler's wait for the mutex, by the workload's clock, and
    neither report nor Perfetto's reading of it calls it a wait for work."""
    path = the_dump(out, run)
    server = tid_of(run, "server_start")
    lock = spans(run, "lock_wait_start", "lock_acquired")
    check(len(lock) == 1, "one slow request: %r" % lock)
    r = report_json(path)
    check(r.get("tid") == server and within(r, lock[0]),
          "the dump is of tid %r [%r, %r], the slow request's handler (tid %d) waited %r; "
          "the live breaches: %r" % (r.get("tid"), r.get("start_ns"), r.get("end_ns"), server,
                                     lock[0], run.breaches()))
    check(r.get("wait_for_work") is False, "report: %r" % r)
    try:
        rows = tp_query(path, "select a.int_value as v from slice s join args a using "
                        "(arg_set_id) where s.name = 'breach' and a.key = 'debug.wait_for_work'")
    except NoTool:
        return
    check(rows and all(row["v"] == 0 for row in rows),
          "Perfetto reads the breach's wait_for_work as %r" % rows)


@test
def idle_waits_are_labelled_and_the_slow_request_is_dumped():
    """An epoll server idle 40 ms between requests, and one request whose handler waits
    25 ms on a mutex, all in one --min-interval with --max-dumps 1: the idle waits (each
    of them longer than the slow request) are labelled in the live JSON, the mutex wait is
    not, and the dump is of the slow request. The main thread's pthread_join of the client
    is labelled too, woken by the client as it exited."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out] + THRESHOLDS + ONE_INTERVAL +
                       NOT_EXEC + ["--no-children", "--"] + SERVER)
        check(run.rc == 0, run.describe())
        idle = long_idle_waits(run)
        check(len(idle) >= 10, "the workload waited for work only %d times: %r"
              % (len(idle), run.log))
        for tid, span in idle:
            # A preemption in the span (state R: a loaded machine can keep the thread
            # off its CPU that long on its way out of epoll_wait) is no wait at all.
            found = [b for b in breaches_in(run, tid, span) if b["state"] != "R"]
            check(found, "no breach of tid %d idle in epoll_wait over %r:\n%s"
                  % (tid, span, run.describe()))
            for b in found:
                check(b["wait_for_work"] is True and b["syscall"] == "epoll_wait",
                      "an idle wait in epoll_wait is not labelled: %r" % b)
        server = tid_of(run, "server_start")
        lock = spans(run, "lock_wait_start", "lock_acquired")[0]
        found = breaches_in(run, server, lock)
        check(found, "no breach of the handler's %d ns wait for the mutex %r:\n%s"
              % (lock[1] - lock[0], lock, run.describe()))
        for b in found:
            check(b["wait_for_work"] is False and b["syscall"] == "futex",
                  "the handler's wait for a mutex is labelled a wait for work: %r" % b)
        main = run.log[0]["pid"]
        join = spans(run, "join_start", "join_end", tid=main, joined="client")
        check(len(join) == 1, "one join of the client: %r" % join)
        found = breaches_in(run, main, join[0])
        check(found, "no breach of the main thread's pthread_join %r:\n%s"
              % (join[0], run.describe()))
        client = tid_of(run, "client_start")
        for b in found:
            check(b["wait_for_work"] is True and b["syscall"] == "futex",
                  "pthread_join of the client (tid %d) is not labelled: %r" % (client, b))
            # A preemption after the wakeup can leave a syscall breach without its waker.
            if b.get("woken_by"):
                check(b["woken_by"].get("tid") == client and b["woken_by"].get("exiting") is True,
                      "the join was not ended by the client as it exited: %r" % b)
        # The summary counts them apart: its largest breach is no idle wait.
        kinds = run.summary()["breaches"]
        check(sum(k["wait_for_work"]["count"] for k in kinds.values()) >= len(idle) and
              max(k["max_ns"] for k in kinds.values()) < lock[1] - lock[0] + 2 * MARGIN_NS,
              "the summary's breaches: %r" % kinds)
        check_dump_is_the_slow_request(out, run)


@test
def a_latch_wait_in_epoll_is_no_wait_for_work():
    """A backend waits in epoll_wait for its client (a socket beside its latch) 40 ms, then
    in epoll_wait on its latch (an eventfd beside a pipe, as postgres's lock waits) 25 ms
    until a peer thread sets it: the client waits are waits for work, the latch waits are
    not (the kernel's fdinfo of each set says what it watches), and the one dump of the
    interval is of a latch wait although every client wait is longer. The peer's own
    sleeps, which pace it, are left out."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out] + THRESHOLDS + ONE_INTERVAL +
                       ["--ignore-syscalls", "nanosleep,clock_nanosleep,execve", "--",
                        workload("latch_wait"), "3", "40", "25"])
        check(run.rc == 0, run.describe())
        backend = run.log[0]["tid"] if run.log else None
        client = spans(run, "client_wait_start", "client_wait_end", tid=backend)
        latch = spans(run, "latch_wait_start", "latch_wait_end", tid=backend)
        check(len(client) == 3 and len(latch) == 3, "workload log incomplete\n" + run.describe())
        for span in client:
            found = breaches_in(run, backend, span)
            check(found and all(b["wait_for_work"] is True and b["syscall"] == "epoll_wait"
                                for b in found),
                  "the wait for the client %r: %r\n%s" % (span, found, run.describe()))
        for span in latch:
            found = breaches_in(run, backend, span)
            check(found and all(b["wait_for_work"] is False and b["syscall"] == "epoll_wait"
                                for b in found),
                  "the wait on the latch %r: %r\n%s" % (span, found, run.describe()))
        r = report_json(the_dump(out, run))
        check(r.get("tid") == backend and any(within(r, span) for span in latch),
              "the dump is of tid %r [%r, %r], not of a latch wait %r"
              % (r.get("tid"), r.get("start_ns"), r.get("end_ns"), latch))
        check(r.get("wait_for_work") is False, "report: %r" % r)


def filtered(run):
    s = run.summary()
    check(s and "filtered" in s, "no summary with a filtered count:\n%s" % run.describe())
    return s["filtered"]


@test
def off_cpu_states_d_drops_s_sleeps():
    """--off-cpu-states D: the main thread's 20 ms wait in D for its CLONE_VFORK child
    breaches; the idle waits in epoll_wait and the handler's wait for the mutex, all in S,
    do not, and the summary counts them as left out."""
    need_root()
    run = hybtrace(["run", "--json", "--rq-delay", "off", "--off-cpu", "10ms",
                    "--off-cpu-states", "D", "--no-children", "--", workload("epoll_server"), "4",
                    "40", "1",
                    "25", "vfork", "20"])
    check(run.rc == 0, run.describe())
    main = tid_of(run, "vfork_start")
    vfork = spans(run, "vfork_start", "vfork_end", tid=main)
    check(len(vfork) == 1 and vfork[0][1] - vfork[0][0] >= 20_000_000,
          "the vfork wait: %r" % vfork)
    live = run.breaches("off-cpu")
    mine = [b for b in live if b["tid"] == main and within(b, vfork[0])]
    check(len(mine) == 1 and mine[0]["state"] == "D" and mine[0]["syscall"] == "clone" and
          mine[0]["wait_for_work"] is False,
          "want the vfork wait's breach in D in clone: %r\n%s" % (mine, run.describe()))
    check(all(b["state"] == "D" for b in live), "breaches not in D: %r" % live)
    idle = long_idle_waits(run)
    check(len(idle) >= 5, "the workload waited for work only %d times" % len(idle))
    for tid, span in idle:
        check(not breaches_in(run, tid, span), "an S sleep breached: %r" % (span,))
    # Each idle wait and the mutex wait were over the threshold: the kernel left them out.
    check(filtered(run) >= len(idle) + 1, "filtered %d, the workload slept in S %d times"
          % (filtered(run), len(idle) + 1))


@test
def ignore_syscalls_drops_those_breaches():
    """--ignore-syscalls epoll_wait: no off-CPU or syscall breach in epoll_wait, counted as
    left out; the mutex wait and the join still breach, and the dump is of the slow request."""
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--output", out, "--ignore-syscalls",
                        "epoll_wait,execve"] +
                       THRESHOLDS + ONE_INTERVAL + ["--no-children", "--"] + SERVER)
        check(run.rc == 0, run.describe())
        live = run.breaches()
        check(not [b for b in live if b.get("syscall") == "epoll_wait"],
              "breaches in epoll_wait: %r" % live)
        idle = long_idle_waits(run)
        check(len(idle) >= 10, "the workload waited for work only %d times" % len(idle))
        check(filtered(run) >= len(idle), "filtered %d, %d idle waits in epoll_wait"
              % (filtered(run), len(idle)))
        server = tid_of(run, "server_start")
        lock = spans(run, "lock_wait_start", "lock_acquired")[0]
        kinds = sorted(b["kind"] for b in breaches_in(run, server, lock))
        check(kinds == ["off-cpu", "syscall"] or kinds == ["syscall"],
              "the mutex wait's breaches: %r\n%s" % (kinds, run.describe()))
        check([b for b in live if b["tid"] == run.log[0]["pid"] and b["wait_for_work"]],
              "the join's breach is gone: %r" % live)
        check_dump_is_the_slow_request(out, run)
