# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A dump as Perfetto's own importer reads it (trace_processor_shell): the checks that no
reading of ours can stand in for. Each raises harness.NoTool where the tool is absent."""
from harness import check, pb_fields, tp_query, trace_packets

# TracePacket.track_event; TrackEvent.flow_ids (fixed64), flow_ids_old (varint).
PACKET_TRACK_EVENT = 11
EVENT_FLOW_IDS = 47
EVENT_FLOW_IDS_OLD = 36


def flows_the_file_begins(path):
    """The flow ids on the file's track events, read from its packets; each begins a flow
    (hybtrace never passes a flow on), so none may appear twice."""
    ids = []
    for packet in trace_packets(path):
        for number, _, event in packet:
            if number != PACKET_TRACK_EVENT:
                continue
            for field, wire, value in pb_fields(event):
                if field == EVENT_FLOW_IDS and wire == 1:
                    ids.append(value)
                elif field == EVENT_FLOW_IDS_OLD and wire == 0:
                    ids.append(value)
                elif field == EVENT_FLOW_IDS and wire == 2:  # packed
                    ids.extend(int.from_bytes(value[i:i + 8], "little")
                               for i in range(0, len(value), 8))
    check(len(ids) == len(set(ids)), "%s begins a flow id twice: %r" % (path, ids))
    return ids


def check_flows(path):
    """Perfetto's flow table holds every flow the file begins, each going forward in time
    (a dump draws none of its own now: the waker relation is native, a thread state's).
    Returns how many there are."""
    begun = flows_the_file_begins(path)
    rows = tp_query(path, "select so.name as out_name, si.name as in_name, so.ts as out_ts, "
                    "si.ts as in_ts from flow f join slice so on so.id = f.slice_out "
                    "join slice si on si.id = f.slice_in")
    check(len(rows) == len(begun), "%s begins %d flows, Perfetto imports %d: %r"
          % (path, len(begun), len(rows), rows[:5]))
    for r in rows:
        check(r["out_ts"] <= r["in_ts"], "%s: a flow %r" % (path, r))
    return len(rows)


def check_no_import_errors(path):
    rows = tp_query(path, "select name, idx, severity, value from stats "
                    "where severity in ('error', 'data_loss') and value > 0")
    check(not rows, "Perfetto's import of %s reports %r" % (path, rows))


def check_global_tracks_have_no_thread(path):
    """No slice off a thread track carries a thread (legacy_event.passthrough_utid, which
    Perfetto gives events of a sequence on which a thread was described)."""
    rows = tp_query(path, "select (select count(*) from slice where track_id not in "
                    "(select id from thread_track)) as global_slices, "
                    "(select count(*) from slice s join args a using (arg_set_id) "
                    "where a.key glob 'legacy_event.*') as with_thread, "
                    "(select count(*) from thread_track tt join thread t using (utid) "
                    "where t.tid > 0) as thread_tracks")
    r = rows[0]
    check(r["global_slices"] > 0, "%s: no slice on a global track to check" % path)
    check(r["with_thread"] == 0, "%s: %d slices carry a thread: %r" % (
        path, r["with_thread"], tp_query(
            path, "select s.name, t.name as track, a.key, a.int_value from slice s "
            "join track t on t.id = s.track_id join args a using (arg_set_id) "
            "where a.key glob 'legacy_event.*' limit 5")))
    check(r["thread_tracks"] > 0, "%s: no thread track belongs to a thread" % path)


def check_dump(path):
    """Everything above; returns the number of flows."""
    check_no_import_errors(path)
    check_global_tracks_have_no_thread(path)
    return check_flows(path)


def stack_instants(path):
    """(slice id, track id, ts, frames root first) of each instant that carries a sampled
    call stack ('user stack before' / 'after'), as Perfetto interned it."""
    out = []
    for r in tp_query(path, "select s.id, s.track_id, s.ts, c.callsite_id from slice s "
                      "join __intrinsic_track_event_callstacks c on c.slice_id = s.id "
                      "where s.name glob 'user stack *' and s.dur = 0"):
        frames = tp_query(path, "select c.depth, f.name from stack_profile_callsite c "
                          "join stack_profile_frame f on f.id = c.frame_id where c.id = %d "
                          "or c.id in (select id from experimental_ancestor_stack_profile_"
                          "callsite(%d)) order by c.depth" % (r["callsite_id"],
                                                               r["callsite_id"]))
        out.append((r["id"], r["track_id"], r["ts"], [f["name"] for f in frames]))
    return out


def check_sample_depths(path):
    """At the time of each sampled stack the dump carries, the user-space slices open on
    its thread's track are that stack, one slice per frame, the outermost at depth 0.
    Returns how many stacks were checked."""
    instants = stack_instants(path)
    for _, track, ts, frames in instants:
        rows = tp_query(path, "select depth, name from slice where track_id = %d and "
                        "category = 'user' and dur > 0 and ts <= %d and ts + dur > %d "
                        "order by depth" % (track, ts, ts))
        check([r["depth"] for r in rows] == list(range(len(rows))),
              "%s: depths at %d are %r" % (path, ts, rows))
        check([r["name"] for r in rows] == frames,
              "%s: at %d Perfetto nests %r, the sample's stack is %r (root first)"
              % (path, ts, [r["name"] for r in rows], frames))
    return len(instants)


def ancestors(path, names):
    """For each slice named in NAMES: (id, name, depth, [ancestor names, nearest first])."""
    out = []
    rows = tp_query(path, "select s.id, s.name, s.depth, a.name as up, a.depth as up_depth "
                    "from slice s left join ancestor_slice(s.id) a where s.name in (%s) "
                    "order by s.id, a.depth desc" % ",".join("'%s'" % n for n in names))
    for r in rows:
        if not out or out[-1][0] != r["id"]:
            out.append((r["id"], r["name"], r["depth"], []))
        if r["up"] is not None:
            out[-1][3].append(r["up"])
    return out


# metadata.trace_time_clock_id of a hybtrace dump: its ClockSnapshot names CLOCK_MONOTONIC
# (the builtin clock 3) the primary trace clock.
TRACE_CLOCK_MONOTONIC = 3


def critical_path(path, tid, start_ns, dur_ns):
    """Perfetto's critical path of thread TID over [START_NS, START_NS + DUR_NS]: the rows of
    sched.thread_executing_span's _thread_executing_span_critical_path, in time order, one
    dict per row: ts, dur, tid and name (of the thread blocking TID then: TID itself where it
    runs or waits for a CPU), utid, id (Perfetto's thread executing span: the id of the
    runnable thread state that begins it, woken by another task), root_id, and that thread's
    thread states clipped to the row: `states`, dicts of ts, dur, state, cpu,
    blocked_function, and for a runnable state waker_tid and irq (whether woken from an
    interrupt; a preempted thread's R has neither), and `state`, the state when one covers the
    whole row, else None. A row usually spans several (R then Running, or a sleep that an
    interrupt ended, which Perfetto leaves inside the sleeper's span).

    Times are the trace processor's timeline, which is the dump's primary trace clock: a
    hybtrace dump names CLOCK_MONOTONIC, so Perfetto converts the BOOTTIME timestamps of its
    native scheduling bundles to MONOTONIC through the ClockSnapshot. These ts are therefore
    the CLOCK_MONOTONIC ns of hybtrace's JSON (a breach's start_ns, end_ns, woken_by.at_ns)
    and of the workloads' wl_log ts_ns, with no offset (a breach's start_ns is its thread
    state's ts, to the ns); START_NS is on that clock too. Checked here, since another
    primary clock would shift them by BOOTTIME - MONOTONIC (the suspended time)."""
    clock = tp_query(path, "select int_value from metadata where name = 'trace_time_clock_id'")
    check(clock and clock[0]["int_value"] == TRACE_CLOCK_MONOTONIC,
          "%s: Perfetto's trace clock is %r, not CLOCK_MONOTONIC" % (path, clock))
    end_ns = start_ns + dur_ns
    # The thread of TID with the most states over the interval (a tid may be reused).
    threads = tp_query(path, "select t.utid from thread t where t.tid = %d order by (select "
                       "count(*) from thread_state s where s.utid = t.utid and s.ts < %d and "
                       "(s.dur < 0 or s.ts + s.dur > %d)) desc, t.utid desc limit 1"
                       % (tid, end_ns, start_ns))
    check(threads, "%s: Perfetto has no thread %d" % (path, tid))
    rows = tp_query(path, "include perfetto module sched.thread_executing_span; "
                    "select cp.root_id, cp.id, cp.ts, cp.dur, cp.utid, t.tid, t.name, "
                    "s.ts as s_ts, s.dur as s_dur, s.state, s.cpu, s.blocked_function, "
                    "s.irq_context, (select w.tid from thread w where w.utid = s.waker_utid) "
                    "as waker_tid "
                    "from _thread_executing_span_critical_path(%d, %d, %d) cp "
                    "join thread t using (utid) left join thread_state s on s.utid = cp.utid "
                    "and s.ts < cp.ts + cp.dur and (s.dur < 0 or s.ts + s.dur > cp.ts) "
                    "order by cp.ts, cp.id, s.ts, s.id" % (threads[0]["utid"], start_ns, dur_ns))
    out = []
    for r in rows:
        key = (r["ts"], r["id"])
        if not out or (out[-1]["ts"], out[-1]["id"]) != key:
            out.append({"ts": r["ts"], "dur": r["dur"], "tid": r["tid"], "name": r["name"],
                        "utid": r["utid"], "id": r["id"], "root_id": r["root_id"],
                        "state": None, "states": []})
        row = out[-1]
        if r["state"] is None:
            continue
        # A thread state's dur is -1 while it lasts to the trace's end.
        s_end = row["ts"] + row["dur"] if r["s_dur"] < 0 else r["s_ts"] + r["s_dur"]
        s_ts = max(r["s_ts"], row["ts"])
        row["states"].append({"ts": s_ts, "dur": min(s_end, row["ts"] + row["dur"]) - s_ts,
                              "state": r["state"], "cpu": r["cpu"],
                              "blocked_function": r["blocked_function"],
                              "waker_tid": r["waker_tid"],
                              "irq": None if r["irq_context"] is None
                              else bool(r["irq_context"])})
    for row in out:
        if len(row["states"]) == 1 and row["states"][0]["dur"] == row["dur"]:
            row["state"] = row["states"][0]["state"]
    return out
