# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A dump's native scheduling data (userspace/kernel/sched_ftrace.c) checked against the rules
of Perfetto's ftrace importer (src/trace_processor/importers/ftrace/ftrace_tokenizer.cc,
ftrace_sched_event_tracker.cc, types/task_state.cc), decoded here from the file's bytes and
not by hybtrace's own reader: a file that hybtrace reads back as it means it can still be one
Perfetto reads otherwise, or drops in part while counting no error.

violations(data) lists what breaks a rule; check_dump(path) raises harness.Failure with them.
check_dumps_in(dirs) checks each dump a run left there once (harness calls it after each run).
"""
import bisect
import os
import re

from harness import ROOT, Failure, pb_fields, pb_varint

# TracePacket fields.
PACKET_FTRACE_EVENTS = 1
PACKET_PROCESS_TREE = 2
PACKET_CLOCK_SNAPSHOT = 6
PACKET_TIMESTAMP = 8
PACKET_TRACK_EVENT = 11
PACKET_SYSTEM_INFO = 45
PACKET_TRACK_DESCRIPTOR = 60
# TrackDescriptor.thread {pid, tid}: the threads the TrackEvent part describes.
TRACK_THREAD = 4
DESCRIPTOR_PID = 1
DESCRIPTOR_TID = 2
# ClockSnapshot.clocks {clock_id, timestamp}; the BOOTTIME and MONOTONIC builtin clocks.
SNAPSHOT_CLOCKS = 1
CLOCK_ID = 1
CLOCK_TIMESTAMP = 2
CLOCK_MONOTONIC = 3
CLOCK_BOOTTIME = 6
# SystemInfo.utsname {sysname, release}.
SYSTEM_INFO_UTSNAME = 1
UTSNAME_SYSNAME = 1
UTSNAME_RELEASE = 3
# ProcessTree.threads {tid, tgid}.
TREE_THREADS = 2
THREAD_TID = 1
THREAD_TGID = 3
# FtraceEventBundle {cpu, compact_sched}; CompactSched's arrays and intern table.
BUNDLE_CPU = 1
BUNDLE_EVENT = 2
BUNDLE_COMPACT_SCHED = 4
# FtraceEvent {pid (the task that ran it), task_newtask {pid, comm, clone_flags}}.
EVENT_PID = 2
EVENT_TASK_NEWTASK = 235
NEWTASK_PID = 1
NEWTASK_CLONE_FLAGS = 3
CLONE_THREAD = 0x10000
COMPACT_INTERN_TABLE = 5
SWITCH_ARRAYS = {1: "switch_timestamp", 2: "switch_prev_state", 3: "switch_next_pid",
                 4: "switch_next_prio", 6: "switch_next_comm_index"}
WAKING_ARRAYS = {7: "waking_timestamp", 8: "waking_pid", 9: "waking_target_cpu",
                 10: "waking_prio", 11: "waking_comm_index"}
WAKING_FLAGS = 12  # optional in Perfetto: the rest of the wakings get no irq context
# TrackEvent.debug_annotations {name, string_value}: the metadata instant names its keys.
EVENT_DEBUG_ANNOTATIONS = 4
ANNOTATION_NAME = 10
ANNOTATION_STRING = 6
META_WINDOW = (b"window_start_ns", b"window_end_ns")

# The tokenizer drops a bundle whose cpu is this or more.
MAX_CPUS = 1024
# trace_entry.flags of a waking from interrupt context (hardirq, softirq).
IRQ_FLAGS = 0x08 | 0x10
# What __trace_sched_switch_state() reports on kernels >= 4.14, which Perfetto decodes as a
# valid state (types/task_state.cc: bits 0xfe00 make it invalid; it reads only the low 16
# bits, so a wider value would silently read as another state): running (0), one
# TASK_REPORT bit, TASK_REPORT_IDLE (0x80), or preempted (TASK_REPORT_MAX, 0x100).
PREV_STATES = {0, 0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0x100}
# BOOTTIME timestamps lie this close to the ClockSnapshot's BOOTTIME reading.
SNAPSHOT_RANGE_NS = 3600 * 10**9
# ... and this close to the window the metadata gives: the two synthetic switches come 2 ns
# before the first thing on their CPU, and a waking's time may move by the run-queue clock's
# skew (HT_FR_WAKEUP_SKEW_NS, userspace/kernel/recorder.h).
WINDOW_SLACK_NS = 20_000 + 2

RULES = {
    1: "bundle has a cpu, one bundle per CPU",
    2: "compact arrays of a kind of equal length, comm indexes inside the intern table",
    3: "timestamps never decrease within a CPU's switches or wakings",
    4: "two synthetic switches first (to pid 0, then to the running task), before the rest",
    5: "a waking inside an on-CPU interval of its bundle's CPU, not of idle nor the wakee "
       "unless from interrupt context",
    6: "BOOTTIME timestamps, the ClockSnapshot first, inside its range and the window",
    7: "system_info.utsname with sysname Linux and a release",
    8: "prev_state a value Perfetto accepts for kernels >= 4.14",
    9: "every thread the file describes has its process's tgid in the process_tree",
}

FIXTURES = os.path.join(ROOT, "tests", "fixtures")


def packed(data, signed=False):
    """The values of a packed varint array; SIGNED reads them as int64 (Perfetto's int32 and
    int64 fields: a negative value is ten bytes of two's complement)."""
    out = []
    v = shift = 0
    for b in data:
        v |= (b & 0x7f) << shift
        if b < 0x80:
            if signed and v >= 1 << 63:
                v -= 1 << 64
            out.append(v)
            v = shift = 0
        else:
            shift += 7
    return out


def absolute(deltas):
    """Delta-decoded timestamps as the tokenizer adds them: each delta as an int64."""
    out, acc = [], 0
    for d in deltas:
        acc += d - (1 << 64) if d >= 1 << 63 else d
        out.append(acc)
    return out


# The TracePacket fields read here besides the metadata's track event.
WANTED_FIELDS = frozenset((PACKET_FTRACE_EVENTS, PACKET_PROCESS_TREE, PACKET_CLOCK_SNAPSHOT,
                           PACKET_SYSTEM_INFO, PACKET_TRACK_DESCRIPTOR))


def packet_spans(data):
    """(index, start, end, wanted) of each TracePacket in the trace file's bytes DATA; wanted
    when it has a field of WANTED_FIELDS at its top level. The track events, most of a dump's
    packets, are only walked over: no field of theirs is made into an object."""
    i, n, index = 0, len(data), 0
    while i < n:
        key, i = pb_varint(data, i)
        wire = key & 7
        if wire == 0:
            _, i = pb_varint(data, i)
            continue
        if wire == 1 or wire == 5:
            i += 8 if wire == 1 else 4
            continue
        if wire != 2:
            raise Failure("protobuf wire type %d at byte %d" % (wire, i))
        size, i = pb_varint(data, i)
        start, end = i, i + size
        i = end
        if key >> 3 != 1:
            continue
        wanted, j = False, start
        while j < end and not wanted:
            b = data[j]
            if b < 0x80:
                k, j = b, j + 1
            else:
                k, j = pb_varint(data, j)
            wanted = k >> 3 in WANTED_FIELDS
            w = k & 7
            if w == 0:
                while data[j] >= 0x80:
                    j += 1
                j += 1
            elif w == 2:
                b = data[j]
                if b < 0x80:
                    j += 1 + b
                else:
                    size, j = pb_varint(data, j)
                    j += size
            elif w == 1:
                j += 8
            elif w == 5:
                j += 4
            else:
                raise Failure("protobuf wire type %d in the packet at byte %d" % (w, start))
        yield index, start, end, wanted
        index += 1


class Bundle:
    """One FtraceEventBundle: its place in the file, cpu, intern table and arrays by name."""

    def __init__(self, packet_index, body):
        self.packet_index = packet_index
        self.cpu = None
        self.has_compact = False
        self.intern = []
        self.arrays = {}
        self.newtasks = {}  # child tid: (the task that started it, clone_flags)
        for number, wire, value in pb_fields(body):
            if number == BUNDLE_CPU and wire == 0:
                self.cpu = value
            elif number == BUNDLE_EVENT and wire == 2:
                self._event(value)
            elif number == BUNDLE_COMPACT_SCHED and wire == 2:
                self.has_compact = True
                self._compact(value)

    def _event(self, data):
        fields = list(pb_fields(data))
        parent = next((v for n, w, v in fields if n == EVENT_PID and w == 0), None)
        for number, wire, value in fields:
            if number == EVENT_TASK_NEWTASK and wire == 2:
                t = dict((n, v) for n, w, v in pb_fields(value) if w == 0)
                if t.get(NEWTASK_PID):
                    self.newtasks[t[NEWTASK_PID]] = (parent, t.get(NEWTASK_CLONE_FLAGS, 0))

    def _compact(self, data):
        names = {**SWITCH_ARRAYS, **WAKING_ARRAYS}
        names[WAKING_FLAGS] = "waking_common_flags"
        signed = {"switch_prev_state", "switch_next_pid", "switch_next_prio", "waking_pid",
                  "waking_target_cpu", "waking_prio"}
        for number, wire, value in pb_fields(data):
            if number == COMPACT_INTERN_TABLE:
                self.intern.append(value.decode("utf-8", "replace"))
            elif number in names and wire == 2:
                name = names[number]
                self.arrays.setdefault(name, []).extend(packed(value, name in signed))
            elif number in names and wire == 0:  # one value, not packed
                self.arrays.setdefault(names[number], []).append(value)

    def get(self, name):
        return self.arrays.get(name, [])

    def switch_ts(self):
        return absolute(self.get("switch_timestamp"))

    def waking_ts(self):
        return absolute(self.get("waking_timestamp"))

    def where(self):
        return "cpu %s (bundle in packet %d)" % (self.cpu, self.packet_index)


class NativeSched:
    """What a dump says for Perfetto's scheduling import, read from its packets."""

    def __init__(self, data):
        self.snapshot = None  # {clock id: ts}
        self.snapshot_index = None
        self.utsname = None
        self.tree_ts = []
        self.tgids = {}
        self.described = {}  # tid: pid, of the TrackEvent part's thread descriptors
        self.bundles = []
        self.meta = {}
        self.native_packets = 0
        for index, start, end, wanted in packet_spans(data):
            packet = data[start:end]
            if wanted:
                self._packet(index, packet)
            elif any(k in packet for k in META_WINDOW):
                self._metadata(list(pb_fields(packet)))

    def _packet(self, index, packet):
        fields = list(pb_fields(packet))
        for number, wire, value in fields:
            if number == PACKET_CLOCK_SNAPSHOT and wire == 2 and self.snapshot is None:
                self.snapshot_index = index
                self.snapshot = {}
                for f, _, clock in pb_fields(value):
                    if f == SNAPSHOT_CLOCKS:
                        c = dict((n, v) for n, _, v in pb_fields(clock))
                        self.snapshot[c.get(CLOCK_ID)] = c.get(CLOCK_TIMESTAMP)
            elif number == PACKET_FTRACE_EVENTS and wire == 2:
                self.native_packets += 1
                self.bundles.append(Bundle(index, value))
            elif number == PACKET_TRACK_DESCRIPTOR and wire == 2:
                for f, _, thread in pb_fields(value):
                    if f == TRACK_THREAD:
                        t = dict((n, v) for n, _, v in pb_fields(thread))
                        if t.get(DESCRIPTOR_PID) and t.get(DESCRIPTOR_TID):
                            self.described[t[DESCRIPTOR_TID]] = t[DESCRIPTOR_PID]
            elif number == PACKET_SYSTEM_INFO and wire == 2:
                self.native_packets += 1
                self._system_info(value)
            elif number == PACKET_PROCESS_TREE and wire == 2:
                self.native_packets += 1
                self.tree_ts.extend(v for n, _, v in fields if n == PACKET_TIMESTAMP)
                for f, _, thread in pb_fields(value):
                    if f == TREE_THREADS:
                        t = dict((n, v) for n, _, v in pb_fields(thread))
                        if THREAD_TID in t and THREAD_TGID in t:
                            self.tgids[t[THREAD_TID]] = t[THREAD_TGID]

    def _system_info(self, data):
        for f, _, uts in pb_fields(data):
            if f == SYSTEM_INFO_UTSNAME:
                self.utsname = {n: v.decode("utf-8", "replace")
                                for n, w, v in pb_fields(uts) if w == 2}

    def _metadata(self, fields):
        for number, _, event in fields:
            if number != PACKET_TRACK_EVENT:
                continue
            for f, _, ann in pb_fields(event):
                if f != EVENT_DEBUG_ANNOTATIONS:
                    continue
                a = {n: v for n, w, v in pb_fields(ann) if w == 2}
                name = a.get(ANNOTATION_NAME, b"").decode()
                if name.encode() in META_WINDOW and a.get(ANNOTATION_STRING, b"").isdigit():
                    self.meta[name] = int(a[ANNOTATION_STRING])

    def boottime_offset(self):
        """BOOTTIME - MONOTONIC at the snapshot; None without both."""
        s = self.snapshot or {}
        if s.get(CLOCK_BOOTTIME) is None or s.get(CLOCK_MONOTONIC) is None:
            return None
        return s[CLOCK_BOOTTIME] - s[CLOCK_MONOTONIC]


class Report:
    """The violations found, each (rule, text), with the first few kept per rule."""

    KEEP = 5

    def __init__(self):
        self.items = []
        self.counts = {}

    def add(self, rule, text):
        self.counts[rule] = self.counts.get(rule, 0) + 1
        if self.counts[rule] <= self.KEEP:
            self.items.append((rule, text))

    def rules(self):
        return set(self.counts)


def check_bundles(ns, r):
    """Rules 1 and 2: each bundle has a cpu under the importer's limit and compact_sched; no
    CPU twice (the writer makes one per CPU: a second would start with no synthetic switch);
    arrays of a kind of one length (the tokenizer stops at the shortest and counts a parse
    error); comm indexes inside the table (a parse error, and the rest dropped)."""
    seen = {}
    for b in ns.bundles:
        if b.cpu is None:
            r.add(1, "%s: no cpu (the tokenizer drops the bundle)" % b.where())
            continue
        if b.cpu >= MAX_CPUS:
            r.add(1, "%s: cpu %d >= %d (dropped)" % (b.where(), b.cpu, MAX_CPUS))
        if b.cpu in seen:
            r.add(1, "%s: a second bundle for cpu %d (the first in packet %d)"
                  % (b.where(), b.cpu, seen[b.cpu]))
        seen[b.cpu] = b.packet_index
        if not b.has_compact:
            r.add(1, "%s: no compact_sched" % b.where())
    for b in ns.bundles:
        for kind in (SWITCH_ARRAYS, WAKING_ARRAYS):
            lengths = {name: len(b.get(name)) for name in kind.values()}
            if len(set(lengths.values())) > 1:
                r.add(2, "%s: unequal arrays %r" % (b.where(), lengths))
        flags = b.arrays.get("waking_common_flags")
        if flags is not None and len(flags) != len(b.get("waking_timestamp")):
            r.add(2, "%s: %d waking_common_flags for %d wakings"
                  % (b.where(), len(flags), len(b.get("waking_timestamp"))))
        for name in ("switch_next_comm_index", "waking_comm_index"):
            for i, c in enumerate(b.get(name)):
                if c >= len(b.intern):
                    r.add(2, "%s: %s[%d] = %d, the intern table has %d"
                          % (b.where(), name, i, c, len(b.intern)))


def check_order(b, sw_ts, wk_ts, r):
    """Rules 3 and 4 for bundle B."""
    for name, ts in (("switch", sw_ts), ("waking", wk_ts)):
        for i in range(1, len(ts)):
            if ts[i] < ts[i - 1]:
                r.add(3, "%s: %s %d at %d, before %s %d at %d"
                      % (b.where(), name, i, ts[i], name, i - 1, ts[i - 1]))
    pids = b.get("switch_next_pid")
    if len(sw_ts) < 2 or len(pids) < 2:
        r.add(4, "%s: %d switches, not the two synthetic ones" % (b.where(), len(sw_ts)))
        return
    if pids[0] != 0:
        r.add(4, "%s: switch 0 is to pid %d, not 0" % (b.where(), pids[0]))
    if not sw_ts[0] < sw_ts[1]:
        r.add(4, "%s: switch 1 at %d is not after switch 0 at %d" % (b.where(), sw_ts[1],
                                                                     sw_ts[0]))
    rest = sw_ts[2:]
    first_other = min(rest) if rest else None
    if first_other is not None and not sw_ts[1] < first_other:
        i = 2 + rest.index(first_other)
        r.add(4, "%s: switch %d at %d is not after the synthetic switches (%d, %d)"
              % (b.where(), i, first_other, sw_ts[0], sw_ts[1]))
    for i, t in enumerate(wk_ts):
        if not t > sw_ts[1]:
            r.add(4, "%s: waking %d at %d is not after the synthetic switches (%d, %d): "
                  "Perfetto drops it or gives it the wrong waker"
                  % (b.where(), i, t, sw_ts[0], sw_ts[1]))


def running_at(sw_ts, t):
    """Index of the switch whose task runs at T as the importer sees it: its sorter orders
    events of one time as they were pushed (trace_sorter.h), a bundle's switches before its
    wakings, so a switch at T counts; -1 before the first switch."""
    return bisect.bisect_right(sw_ts, t) - 1


def check_wakings(b, sw_ts, wk_ts, r):
    """Rule 5: the task Perfetto takes for a waking's waker (what runs on the bundle's CPU
    then) is neither the idle task nor the wakee itself, unless the waking came from
    interrupt context."""
    pids = b.get("switch_next_pid")
    wakees = b.get("waking_pid")
    flags = b.arrays.get("waking_common_flags") or []
    n = min(len(sw_ts), len(pids))
    for i, t in enumerate(wk_ts[:len(wakees)]):
        k = running_at(sw_ts[:n], t)
        f = flags[i] if i < len(flags) else 0
        if k < 0:
            r.add(5, "%s: waking %d of %d at %d before any switch" % (b.where(), i,
                                                                      wakees[i], t))
            continue
        if f & IRQ_FLAGS:
            continue
        if pids[k] == 0:
            r.add(5, "%s: waking %d of %d at %d, flags %#x, falls on the idle task (since "
                  "switch %d at %d): Perfetto takes swapper for its waker"
                  % (b.where(), i, wakees[i], t, f, k, sw_ts[k]))
        elif pids[k] == wakees[i]:
            r.add(5, "%s: waking %d of %d at %d falls on the wakee's own time on the CPU "
                  "(switch %d at %d)" % (b.where(), i, wakees[i], t, k, sw_ts[k]))


def check_times(ns, r):
    """Rule 6: the ClockSnapshot, with BOOTTIME, comes before the first bundle (a timestamp
    the clock tracker cannot convert drops the rest of its bundle), and every time lies
    within an hour of the snapshot's BOOTTIME and within the metadata's window."""
    boot = (ns.snapshot or {}).get(CLOCK_BOOTTIME)
    if ns.bundles and ns.snapshot_index is None:
        r.add(6, "no ClockSnapshot before the bundles")
        return
    if ns.bundles and ns.snapshot_index > ns.bundles[0].packet_index:
        r.add(6, "the ClockSnapshot (packet %d) comes after the first bundle (packet %d)"
              % (ns.snapshot_index, ns.bundles[0].packet_index))
    if boot is None:
        if ns.bundles:
            r.add(6, "the ClockSnapshot has no BOOTTIME")
        return
    lo, hi = boot - SNAPSHOT_RANGE_NS, boot + SNAPSHOT_RANGE_NS
    offset = ns.boottime_offset()
    if offset is not None and len(ns.meta) == 2:
        lo = max(lo, ns.meta["window_start_ns"] + offset - WINDOW_SLACK_NS)
        hi = min(hi, ns.meta["window_end_ns"] + offset + WINDOW_SLACK_NS)
    for t in ns.tree_ts:
        if not lo <= t <= hi:
            r.add(6, "process_tree at %d outside [%d, %d]" % (t, lo, hi))
    for b in ns.bundles:
        for name, ts in (("switch", b.switch_ts()), ("waking", b.waking_ts())):
            for i, t in enumerate(ts):
                if not lo <= t <= hi:
                    r.add(6, "%s: %s %d at %d outside [%d, %d] (BOOTTIME at the snapshot "
                          "%d, window %r)" % (b.where(), name, i, t, lo, hi, boot, ns.meta))


def check_utsname(ns, r):
    """Rule 7: without utsname Perfetto decodes prev_state with 4.4's layout."""
    u = ns.utsname
    if u is None:
        r.add(7, "no system_info.utsname")
    elif u.get(UTSNAME_SYSNAME) != "Linux" or not re.match(r"\d+\.\d+",
                                                           u.get(UTSNAME_RELEASE, "")):
        r.add(7, "utsname %r: sysname not Linux or no release Perfetto can read" % u)


def check_states(b, r):
    """Rule 8."""
    for i, s in enumerate(b.get("switch_prev_state")):
        if s not in PREV_STATES:
            r.add(8, "%s: switch %d prev_state %#x (Perfetto reads %#x: %s)"
                  % (b.where(), i, s, s & 0xffff,
                     "invalid" if s & 0xfe00 else "another state"))


def check_tgids(ns, r):
    """Rule 9: a thread without a tgid is a thread of no process in Perfetto. Every thread the
    file knows the process of (a thread descriptor of its TrackEvent part: the targets', the
    tasks that ran instead) has that tgid in the process_tree, whatever the comm map and
    /proc still knew when the dump was made. A task known nowhere else (one that exited
    before the dump was made, its comm map entry gone) may have none."""
    newtasks = {}
    for b in ns.bundles:
        newtasks.update(b.newtasks)

    def tgid_of(tid, depth=0):
        """The process tree's tgid, else, for a thread a CLONE_THREAD task_newtask started,
        its starter's process (Perfetto puts it there)."""
        if tid in ns.tgids or depth > 8:
            return ns.tgids.get(tid)
        parent, flags = newtasks.get(tid, (None, 0))
        return tgid_of(parent, depth + 1) if parent and flags & CLONE_THREAD else None

    seen = set()
    for b in ns.bundles:
        for name in ("switch_next_pid", "waking_pid"):
            for i, tid in enumerate(b.get(name)):
                if tid in ns.described and tid not in seen:
                    seen.add(tid)
                    if tgid_of(tid) != ns.described[tid]:
                        r.add(9, "%s: %s[%d] = %d, of process %d in its thread descriptor, "
                              "has tgid %r in the process_tree" % (
                                  b.where(), name, i, tid, ns.described[tid], tgid_of(tid)))


def violations(data):
    """What in DATA (a trace file's bytes) breaks the rules: a Report. A file without native
    scheduling data (no bundle, no utsname, no process tree) has none to check: None."""
    try:
        ns = NativeSched(data)
    except (IndexError, Failure) as e:
        r = Report()
        r.add(0, "not a readable trace (%s)" % e)
        return r
    if not ns.native_packets:
        return None
    r = Report()
    check_bundles(ns, r)
    check_times(ns, r)
    check_utsname(ns, r)
    check_tgids(ns, r)
    for b in ns.bundles:
        sw_ts, wk_ts = b.switch_ts(), b.waking_ts()
        check_order(b, sw_ts, wk_ts, r)
        check_wakings(b, sw_ts, wk_ts, r)
        check_states(b, r)
    return r


def describe(name, r):
    if not r.counts:
        return "%s keeps every rule" % name
    lines = ["%s breaks Perfetto's import rules:" % name]
    for rule in sorted(r.counts):
        lines.append("  rule %d (%s): %d" % (rule, RULES.get(rule, "readable"), r.counts[rule]))
    lines += ["  rule %d: %s" % (rule, text) for rule, text in r.items]
    return "\n".join(lines)


def check_dump(path, require_native=True):
    """Raise Failure naming each broken rule of the dump at PATH. A dump the suite made always
    has native data (REQUIRE_NATIVE); the committed dumps of earlier versions have none."""
    with open(path, "rb") as f:
        data = f.read()
    r = violations(data)
    if r is None:
        if require_native:
            raise Failure("%s has no native scheduling data (no FtraceEventBundle, "
                          "system_info or process_tree)" % path)
        return
    if r.counts:
        raise Failure(describe(path, r))


_checked = {}


def _key(path):
    """What tells one version of the file at PATH from another; None if it is no file."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino) if os.path.isfile(path) else None


def dumps_now(dirs):
    """{path: version} of the *.perfetto-trace files in DIRS now (a dump of an earlier version,
    under tests/fixtures, left out)."""
    out = {}
    for d in dirs:
        if not d or not os.path.isdir(d):
            continue
        for name in os.listdir(d):
            path = os.path.abspath(os.path.join(d, name))
            if name.endswith(".perfetto-trace") and not path.startswith(FIXTURES + os.sep):
                key = _key(path)
                if key:
                    out[path] = key
    return out


def check_dump_once(path):
    """check_dump(PATH) unless this version of it passed before (or it is a fixture)."""
    path = os.path.abspath(path)
    key = _key(path)
    if not key or _checked.get(path) == key or path.startswith(FIXTURES + os.sep):
        return
    check_dump(path)
    _checked[path] = key


def check_dumps_in(dirs, before=None):
    """Check each dump in DIRS that is not in BEFORE (dumps_now() before the run: a shared
    directory such as /tmp holds others' dumps) as it was then."""
    before = before or {}
    for path, key in sorted(dumps_now(dirs).items()):
        if before.get(path) != key:
            check_dump_once(path)
