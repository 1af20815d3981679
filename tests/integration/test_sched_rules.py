# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""sched_rules on hand-built traces: a file that keeps every rule passes, and each way of
breaking one is caught under that rule. Needs neither root nor hybtrace, so it runs wherever
the suite does: the check on every dump is only worth what it catches here."""
from harness import check, test
import sched_rules

BOOT = 1_000_000_000_000  # the snapshot's BOOTTIME; MONOTONIC is 5 s behind it
OFFSET = 5_000_000_000
T0 = BOOT - OFFSET - 50_000_000  # the window, MONOTONIC: 50 ms before the snapshot
T1 = T0 + 20_000_000


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append(v & 0x7f | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(number, value):
    """A varint field for an int, a length-delimited one for bytes or str."""
    if isinstance(value, int):
        return varint(number << 3) + varint(value)
    if isinstance(value, str):
        value = value.encode()
    return varint(number << 3 | 2) + varint(len(value)) + value


def packed(values):
    return b"".join(varint(v) for v in values)


def deltas(ts):
    return [t - (ts[i - 1] if i else 0) for i, t in enumerate(ts)]


def newtask(ts, parent, child, clone_flags):
    """A full FtraceEvent: PARENT starts CHILD (task_newtask)."""
    return field(2, field(1, ts) + field(2, parent) +
                 field(235, field(1, child) + field(2, "c") + field(3, clone_flags)))


def bundle(cpu, switches, wakings, comms, with_cpu=True, short=None, events=b""):
    """A TracePacket with one FtraceEventBundle: SWITCHES (ts, prev_state, next_pid, comm
    index) and WAKINGS (ts, pid, comm index, flags), absolute times; the array of field
    SHORT one value short; EVENTS, full FtraceEvents (bundle field 2)."""
    arrays = [(1, deltas([s[0] for s in switches])), (2, [s[1] for s in switches]),
              (3, [s[2] for s in switches]), (4, [120] * len(switches)),
              (6, [s[3] for s in switches]),
              (7, deltas([w[0] for w in wakings])), (8, [w[1] for w in wakings]),
              (9, [cpu] * len(wakings)), (10, [120] * len(wakings)),
              (11, [w[2] for w in wakings]), (12, [w[3] for w in wakings])]
    compact = b"".join(field(5, c) for c in comms)
    compact += b"".join(field(n, packed(v[:-1] if n == short else v)) for n, v in arrays if v)
    body = (field(1, cpu) if with_cpu else b"") + events + field(4, compact)
    return field(1, field(1, body))


def clock_snapshot():
    clocks = [(6, BOOT), (3, BOOT - OFFSET), (1, 1_700_000_000 * 10**9)]
    return field(1, field(6, b"".join(field(1, field(1, c) + field(2, t)) for c, t in clocks)))


def metadata():
    anns = b"".join(field(4, field(10, k) + field(6, str(v)))
                    for k, v in (("window_start_ns", T0), ("window_end_ns", T1)))
    return field(1, field(8, T0) + field(11, field(11, 1) + field(23, "metadata") + anns))


def system_info(sysname="Linux", release="6.1.0"):
    return field(1, field(45, field(1, field(1, sysname) + field(3, release))))


def process_tree(threads):
    return field(1, field(8, T0 + OFFSET) + field(2, b"".join(
        field(2, field(1, tid) + field(3, tgid)) for tid, tgid in threads)))


def thread_descriptors(threads):
    """The TrackEvent part's thread tracks: TrackDescriptor {uuid, thread {pid, tid}}."""
    return b"".join(field(1, field(60, field(1, 1000 + tid) + field(4, field(1, tgid) +
                                                                    field(2, tid))))
                    for tid, tgid in threads)


def boot(mono_ns):
    return mono_ns + OFFSET


def good_cpu0():
    """CPU 0: idle, then 100 (S: 1), 200; 100 wakes 200 and an interrupt wakes 300 on idle."""
    t = boot(T0)
    switches = [(t - 2, 0, 0, 0), (t - 1, 0, 100, 1), (t + 1000, 1, 200, 2),
                (t + 5000, 0x100, 0, 0)]
    wakings = [(t + 500, 200, 2, 0), (t + 6000, 300, 3, 0x08)]
    return switches, wakings


def good_cpu1():
    t = boot(T0)
    return [(t - 2, 0, 0, 0), (t - 1, 0, 300, 1), (t + 9000, 0x80, 0, 0)], []


COMMS = ["swapper/0", "a", "b", "c"]
THREADS = [(100, 100), (200, 100), (300, 300)]


def trace(cpu0=None, cpu1=None, snapshot_first=True, uts=None, threads=THREADS,
          cpu0_has_cpu=True, cpu0_short=None, extra=b"", described=THREADS, events0=b""):
    sw0, wk0 = cpu0 or good_cpu0()
    sw1, wk1 = cpu1 or good_cpu1()
    bundles = (bundle(0, sw0, wk0, COMMS, cpu0_has_cpu, cpu0_short, events0) +
               bundle(1, sw1, wk1, COMMS) + extra)
    head = (metadata() + thread_descriptors(described) +
            (uts if uts is not None else system_info()) + process_tree(threads))
    if snapshot_first:
        return clock_snapshot() + head + bundles
    return head + bundles + clock_snapshot()


def caught(data, rule, what):
    """DATA breaks RULE, and sched_rules says so under that rule."""
    r = sched_rules.violations(data)
    check(r is not None and rule in r.rules(),
          "sched_rules misses %s (rule %d): %s"
          % (what, rule, sched_rules.describe("the trace", r) if r else "no native data"))


@test
def sched_rules_pass_a_good_trace():
    """The hand-built trace keeps every rule, so each case below breaks only what it means to."""
    r = sched_rules.violations(trace())
    check(r is not None and not r.counts, sched_rules.describe("the good trace", r)
          if r else "the good trace reads as having no native data")


@test
def sched_rules_catch_each_broken_rule():
    """One trace per defect, each caught under its rule."""
    sw, wk = good_cpu0()
    t = boot(T0)
    caught(trace(cpu0_has_cpu=False), 1, "a bundle without cpu")
    caught(trace(extra=bundle(1, *good_cpu1(), COMMS)), 1, "two bundles for one CPU")
    caught(trace(cpu0_short=6), 2, "a switch array one short (next_comm_index)")
    caught(trace(cpu0_short=8), 2, "a waking array one short (pid)")
    caught(trace(cpu0_short=12), 2, "fewer waking_common_flags than wakings")
    caught(trace(cpu0=(sw[:3] + [(t + 5000, 0, 0, 9)], wk)), 2, "a comm index past the table")
    caught(trace(cpu0=(sw[:2] + [(t + 5000, 1, 200, 2), (t + 1000, 0x100, 0, 0)], wk)), 3,
           "switch times that decrease")
    caught(trace(cpu0=(sw, [wk[1], wk[0]])), 3, "waking times that decrease")
    caught(trace(cpu0=(sw[2:], [])), 4, "no synthetic switches")
    caught(trace(cpu0=([sw[1], sw[0]] + sw[2:], wk)), 4, "the synthetic switches swapped")
    caught(trace(cpu0=(sw, [(t - 1, 200, 2, 0)] + wk)), 4,
           "a waking at the synthetic switch's time")
    caught(trace(cpu0=(sw, wk[:1] + [(t + 6000, 300, 3, 0)])), 5,
           "a waking on the idle task without irq flags")
    caught(trace(cpu0=(sw, [(t + 2000, 200, 2, 0)])), 5, "a waking in the wakee's own time")
    caught(trace(cpu0=(sw[:2] + [(t + 1000, 0x2002, 200, 2)] + sw[3:], wk)), 8,
           "prev_state 0x2002 (TASK_FREEZABLE)")
    caught(trace(cpu0=(sw[:2] + [(t + 1000, 0x3, 200, 2)] + sw[3:], wk)), 8,
           "prev_state of two report bits")
    caught(trace(snapshot_first=False), 6, "the ClockSnapshot after the bundles")
    caught(trace(cpu0=([(s[0] - OFFSET,) + s[1:] for s in sw],
                       [(w[0] - OFFSET,) + w[1:] for w in wk])), 6,
           "MONOTONIC times where BOOTTIME belongs")
    caught(trace(uts=b""), 7, "no utsname")
    caught(trace(uts=system_info(sysname="Darwin")), 7, "a sysname other than Linux")
    caught(trace(threads=THREADS[1:]), 9, "a described thread without a tgid")
    caught(trace(described=[(200, 300)]), 9, "a thread of another process than described")
    # 100 starts thread 200 (its process, 100, only through the task_newtask) or process 200.
    started = [(100, 100), (300, 300)]
    t = boot(T0)
    r = sched_rules.violations(trace(threads=started, events0=newtask(t + 100, 100, 200,
                                                                      0x10000)))
    check(r is not None and not r.rules(), "a thread a CLONE_THREAD task_newtask started "
          "is not taken as of its starter's process: %r" % (r and r.rules()))
    caught(trace(threads=started, events0=newtask(t + 100, 100, 200, 0)), 9,
           "a process task_newtask started, not in the process tree")
