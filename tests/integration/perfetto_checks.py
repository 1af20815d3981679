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
