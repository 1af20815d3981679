# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Intel PT end to end, on any machine: the live capture path, raw captures and decode.

Machines without PT run the capture in its test mode (HYBTRACE_TEST_PT_SIDEBAND_ONLY):
the sideband events, mappings, build-ids, clock pairs and freezes are real, only the
PT bytes are missing. The PT bytes themselves are proven by the synthesized streams of
the unit tests (tests/unit/test_intelpt_decode.c, test_pt_dump.c); a real capture runs where
/sys/bus/event_source/devices/intel_pt exists.
"""
import glob
import os
import struct
import subprocess
import tempfile
import time

from harness import (HYBTRACE, ROOT, Attached, Cgroup, NoHardware, Run, check, check_new_dumps,
                     dumps_before, hybtrace, need_root, read_log, report_json, test, tp_query,
                     trace_processor, wait_for, workload)
from perfetto_checks import check_global_tracks_have_no_thread, check_no_import_errors

HAS_PT = os.path.exists("/sys/bus/event_source/devices/intel_pt")
TEST_MODE = {"HYBTRACE_TEST_PT_SIDEBAND_ONLY": "1"}
# What the test mode's dumps call their source: never "pt", for no PT event was opened.
TEST_MODE_SOURCE = "pt-sideband-only"
TEST_MODE_LINE = "test capture (HYBTRACE_TEST_PT_SIDEBAND_ONLY)"
LIVE_SOURCE = "pt" if HAS_PT else TEST_MODE_SOURCE
# What a decode elsewhere cannot know, or says about itself.
LIVE_ONLY_META = {"decoded_from", "recording_start_ns", "loss.ring_buffer_drops",
                  "loss.task_storage_failures", "loss.comm_map_failures",
                  "loss.recursion_misses", "loss.unseen_switch_ins", "breaches_not_dumped",
                  "loss.pt_threads_left_out",
                  # Marks are read from the live processes' memory, not kept in a capture.
                  "loss.marks", "loss.mark_processes", "marks.processes", "marks.read_ns"}


def decode(raw, outdir, as_nobody=False):
    cmd = [HYBTRACE, "decode", raw, "--output", outdir]
    if as_nobody:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
               "--inh-caps=-all", "--bounding-set=-all"] + cmd
    before = dumps_before(["--output", outdir], os.getcwd())
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    check_new_dumps(["--output", outdir], os.getcwd(), before)
    return p


def live_pt_run(out, max_dumps=2, env=None):
    """steady under --source pt --keep-raw: syscall breaches, a dump or two with raw files."""
    return hybtrace(["run", "--json", "--rq-delay", "off", "--syscall", "2ms", "--source", "pt",
                     "--keep-raw", "--output", out, "--min-interval", "200ms", "--max-dumps",
                     str(max_dumps), "--", workload("steady"), "1", "3", "500", "100"],
                    env=env if env is not None else ({} if HAS_PT else TEST_MODE))


def comparable(report, also=()):
    """A report without what only the live session knows (and the keys ALSO)."""
    leave = LIVE_ONLY_META | set(also)
    r = dict(report)
    r.pop("file")
    r["metadata"] = {k: v for k, v in r["metadata"].items() if k not in leave}
    r["losses"] = {k: v for k, v in r["losses"].items() if k not in leave}
    return r


def check_same(live, offline, also=()):
    a, b = comparable(live, also), comparable(offline, also)
    diff = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
    check(not diff, "decoded differs from the live dump in %s:\n%s" % (
        diff, "\n".join("%s: %r != %r" % (k, a.get(k), b.get(k)) for k in diff)))


@test
def keep_raw_decodes_to_the_live_dump():
    need_root()
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as dec:
        run = live_pt_run(out)
        check(run.rc == 0, run.describe())
        attached = [o for o in run.json_lines() if o.get("type") == "attached"]
        check(attached and attached[0]["source"] == LIVE_SOURCE, "source: %r" % attached)
        raws = sorted(glob.glob(os.path.join(out, "*.hybtrace-raw")))
        dumps = sorted(glob.glob(os.path.join(out, "*.perfetto-trace")))
        check(raws and len(raws) == len(dumps), "raw %r, dumps %r" % (raws, dumps))
        os.chmod(dec, 0o777)
        os.chmod(out, 0o755)
        for raw, dump in zip(raws, dumps):
            os.chmod(raw, 0o644)
            live = report_json(dump)
            check(live["metadata"]["on_cpu_source"] == LIVE_SOURCE, "%r" % live["metadata"])
            check(int(live["metadata"]["pt.freeze_last_ns"]) > 0, "no freeze delay")
            check(live["timeline"], "empty timeline in %s" % dump)
            # As root: exactly the live dump.
            p = decode(raw, dec)
            check(p.returncode == 0, "decode %s: %s" % (raw, p.stderr))
            made = p.stdout.strip()
            check(os.path.dirname(made) == dec and made.endswith(".perfetto-trace"),
                  "decode said %r" % p.stdout)
            check(os.path.basename(made) == os.path.basename(dump),
                  "named %s, want the dump's name %s" % (made, dump))
            offline = report_json(made)
            check(offline["metadata"].get("decoded_from") == raw, "%r" % offline["metadata"])
            check_same(live, offline)
            # With no privileges at all: the same, but for the target's files it may not
            # read (a checkout in a private directory), which it counts.
            p = decode(raw, dec, as_nobody=True)
            check(p.returncode == 0, "decode as nobody %s: %s" % (raw, p.stderr))
            again = p.stdout.strip()
            check(again != made, "a second decode overwrote %s" % made)
            check_same(live, report_json(again), also=("loss.pt_code_unreadable",))


def report_text(path):
    p = subprocess.run([HYBTRACE, "report", path], capture_output=True, text=True, timeout=120)
    check(p.returncode == 0, "report %s failed: %s" % (path, p.stderr))
    return p.stdout


@test
def test_mode_dumps_say_they_hold_no_pt():
    """The test mode opens no PT event (nor could it here without PT): its dumps, their
    offline decode and their report say so, and hold no PT bytes."""
    need_root()
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as dec:
        run = live_pt_run(out, max_dumps=1, env=TEST_MODE)
        check(run.rc == 0, run.describe())
        attached = [o for o in run.json_lines() if o.get("type") == "attached"]
        check(attached and attached[0]["source"] == TEST_MODE_SOURCE, "source: %r" % attached)
        raws = glob.glob(os.path.join(out, "*.hybtrace-raw"))
        dumps = glob.glob(os.path.join(out, "*.perfetto-trace"))
        check(len(raws) == 1 and len(dumps) == 1, "raw %r, dumps %r" % (raws, dumps))
        p = decode(raws[0], dec)
        check(p.returncode == 0, "decode %s: %s" % (raws[0], p.stderr))
        for dump in (dumps[0], p.stdout.strip()):
            meta = report_json(dump)["metadata"]
            check(meta["on_cpu_source"] == TEST_MODE_SOURCE, "%s: %r" % (dump, meta))
            check(meta["pt.bytes"] == "0", "%s: PT bytes in a test capture: %r" % (dump, meta))
            # Said in the report's head (the lines before the first blank one), which may also
            # say what the kernel did not trace of the breach.
            text = report_text(dump)
            head = text.split("\n\n")[0].splitlines()
            check(any(TEST_MODE_LINE in line for line in head), "%s: report says\n%s"
                  % (dump, text))


RAW_HEADER_BYTES = 16
RAWSEC_SIDEBAND = 7
RAWSEC_MAPS = 8
# Each sideband record ends with its sample_id: pid, tid, time, cpu (HT_INTELPT_SIDEBAND_SAMPLE_TYPE).
SAMPLE_ID_BYTES = 24
PROCS_SPIN_PROGRAM = {"alpha": "/procs_spin", "beta": "/procs_spin_beta",
                      "gamma": "/procs_spin_gamma"}


def raw_sections(path, wanted):
    """The bodies of a raw capture's sections tagged WANTED (rawcap.h), in file order."""
    with open(path, "rb") as f:
        data = f.read()
    at = RAW_HEADER_BYTES
    while at + 16 <= len(data):
        tag, _, n = struct.unpack_from("<IIQ", data, at)
        body, at = data[at + 16:at + 16 + n], at + 16 + n
        if tag == wanted:
            yield body


def raw_maps(path):
    """The MAPS sections of a raw capture (rawcap.h, format 1.5): [(pid, [mapped paths])]."""
    out = []
    for body in raw_sections(path, RAWSEC_MAPS):
        count, = struct.unpack_from("<I", body, 8)
        pos, paths = 12, []
        for _ in range(count):
            pos += 28
            plen, = struct.unpack_from("<I", body, pos)
            paths.append(body[pos + 4:pos + 4 + plen].decode())
            pos += 4 + plen
            blen, = struct.unpack_from("<H", body, pos)
            pos += 2 + blen
        pid, = struct.unpack_from("<I", body, pos)
        out.append((pid, paths))
    return out


def raw_sideband_pids(path):
    """The processes whose tasks the sideband records of a raw capture were written for."""
    pids = set()
    for body in raw_sections(path, RAWSEC_SIDEBAND):
        pos = 12  # cpu, frozen_ns
        while pos + 8 <= len(body):
            size, = struct.unpack_from("<H", body, pos + 6)
            if size < 8 + SAMPLE_ID_BYTES or pos + size > len(body):
                break
            pids.add(struct.unpack_from("<I", body, pos + size - SAMPLE_ID_BYTES)[0])
            pos += size
    return pids


def check_procs_spin_code(raw, pid, role, paths, what="procs_spin"):
    """A procs_spin process's mappings in capture RAW hold its own program, or, caught between
    its fork and its exec, its parent's, or, caught inside its exec (its new memory holds no
    file yet: beside stress-ng once), none. Whether they hold its own."""
    exes = {p for p in paths if "/procs_spin" in p}
    want = {p for p in exes if p.endswith(PROCS_SPIN_PROGRAM[role])}
    forked = {p for p in exes if p.endswith(PROCS_SPIN_PROGRAM["alpha"])}
    in_exec = not any(p.startswith("/") for p in paths)
    check((want and exes == want) or (forked and exes == forked) or in_exec,
          "%s: %s process %d (%s) has the code of %r (mapped: %r)"
          % (raw, what, pid, role, sorted(exes), paths))
    return bool(want) and exes == want


@test
def sideband_mode_every_process_keeps_its_own_code():
    """Sideband test mode (HYBTRACE_TEST_PT_SIDEBAND_ONLY: no PT bytes, so no call stacks
    here; the decode of each process against its own code is the synthesized captures' test
    in test_pt_dump.c). `run` follows the command's children: procs_spin (alpha) forks beta
    and gamma, which exec programs of their own; each kept raw capture holds, under each
    process's own pid, that process's mappings with its own program and no other's, and
    the dump counts the processes (pt.processes)."""
    need_root()
    if HAS_PT:
        raise NoHardware("the sideband test mode is for machines without Intel PT")
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--json", "--rq-delay", "2ms", "--source", "pt", "--keep-raw",
                        "--pre", "60ms", "--dump-policy", "first", "--min-interval", "100ms",
                        "--max-dumps", "3", "--output", out, "--",
                        workload("procs_spin"), "30", "20", "10", "0"],
                       env=TEST_MODE, timeout=120)
        check(run.rc == 0, run.describe())
        roles = {e["pid"]: e["role"] for e in run.log if e["event"] == "ready"}
        check(sorted(roles.values()) == ["alpha", "beta", "gamma"], "roles %r\n%s"
              % (roles, run.describe()))
        raws = sorted(glob.glob(os.path.join(out, "*.hybtrace-raw")))
        check(raws, "no raw capture: " + run.describe())
        most = own_after_exec = 0
        for raw in raws:
            last = {}
            for pid, paths in raw_maps(raw):
                last[pid] = paths
            ours = [pid for pid in last if pid in roles]
            most = max(most, len(ours))
            for pid in ours:
                own = check_procs_spin_code(raw, pid, roles[pid], last[pid])
                own_after_exec += roles[pid] != "alpha" and own
            dump = raw.replace(".hybtrace-raw", ".perfetto-trace")
            meta = report_json(dump)["metadata"]
            check(int(meta["pt.processes"]) == len(last), "%s: pt.processes %s, the capture "
                  "holds %d processes' code" % (dump, meta["pt.processes"], len(last)))
            check(meta["loss.pt_threads_left_out"] == "0", "%r" % meta)
        check(most >= 2, "no capture held the code of more than one of procs_spin's "
              "processes: " + run.describe())
        check(own_after_exec, "no capture held beta's or gamma's own program: "
              + run.describe())


def start_procs_spin(log, stop, preexec_fn=None):
    """procs_spin on CPU 0 (alpha forks beta and gamma), until STOP exists."""
    return subprocess.Popen([workload("procs_spin"), "1000", "20", "10", "0"],
                            preexec_fn=preexec_fn,
                            env=dict(os.environ, HT_WORKLOAD_LOG=log, HT_STOP_FILE=stop))


def procs_spin_roles(log):
    """{pid: role} of a procs_spin whose three processes are ready, else {}."""
    roles = {e["pid"]: e["role"] for e in read_log(log) if e["event"] == "ready"}
    return roles if len(roles) == 3 else {}


def captures_code(raws):
    """{raw capture: {pid: [mapped paths]}}: each process's last mappings in it."""
    out = {}
    for raw in raws:
        out[raw] = {}
        for pid, paths in raw_maps(raw):
            out[raw][pid] = paths
    return out


def check_own_programs(code, roles, what):
    """Every process of ROLES a capture holds has its own program (check_procs_spin_code);
    some capture holds one's own."""
    own = 0
    for raw, procs in code.items():
        for pid in set(procs) & set(roles):
            own += check_procs_spin_code(raw, pid, roles[pid], procs[pid], what)
    check(own, "no capture held the code of %s's processes %r: %r"
          % (what, roles, {r: sorted(p) for r, p in code.items()}))


@test
def sideband_mode_follows_a_cgroup_cpu_by_cpu():
    """Sideband test mode, --cgroup: processes join a cgroup by moving in, not only by
    fork, so its events are per CPU, of the cgroup's tasks alone. procs_spin starts in the
    cgroup after attach and a second one outside it on the same CPU; a while later the
    outsider's first process moves in. Each kept capture holds the code of members alone,
    each process its own program under its own pid: the first procs_spin's, the mover's
    once it moved, never the outsider's other processes' nor hybtrace's own."""
    need_root()
    if HAS_PT:
        raise NoHardware("the sideband test mode is for machines without Intel PT")
    with Cgroup() as cg, tempfile.TemporaryDirectory() as out:
        stop = os.path.join(out, "stop")
        logs = [os.path.join(out, "in.log"), os.path.join(out, "out.log")]
        ht = Attached(["--cgroup", cg.path, "--json", "--source", "pt", "--keep-raw",
                       "--rq-delay", "2ms", "--off-cpu", "off", "--pre", "60ms",
                       "--dump-policy", "first", "--min-interval", "150ms",
                       "--max-dumps", "30", "--output", out], env=TEST_MODE)
        spins = []
        try:
            ht.wait_attached()
            spins.append(start_procs_spin(logs[0], stop, preexec_fn=cg.join))
            spins.append(start_procs_spin(logs[1], stop))
            wait_for(lambda: procs_spin_roles(logs[0]) and procs_spin_roles(logs[1]), 20,
                     "both procs_spin ready")
            members, outsiders = procs_spin_roles(logs[0]), procs_spin_roles(logs[1])
            wait_for(lambda: len(glob.glob(os.path.join(out, "*.hybtrace-raw"))) >= 2, 30,
                     "two captures before the move")
            before_move = set(glob.glob(os.path.join(out, "*.hybtrace-raw")))
            mover = spins[1].pid
            cg.move(mover, cg.path)
            time.sleep(0.1)  # a capture being made at the move may be kept after it
            settled = len(glob.glob(os.path.join(out, "*.hybtrace-raw")))
            wait_for(lambda: len(glob.glob(os.path.join(out, "*.hybtrace-raw")))
                     >= settled + 3, 30, "three captures after the move")
            open(stop, "w").close()
            for p in spins:
                p.wait(30)
            check(ht.stop() == 0, ht.describe())
        finally:
            open(stop, "w").close()
            for p in spins:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            ht.close()
        code = captures_code(sorted(glob.glob(os.path.join(out, "*.hybtrace-raw"))))
        for raw, procs in code.items():
            # The kernel ran the events for the cgroup's tasks alone.
            ran = raw_sideband_pids(raw) - {0}
            check(ran and not ran - set(members) - {mover}, "%s: sideband records of %r, "
                  "not the cgroup's (members %r, the mover %d, outside %r, hybtrace %d)" % (
                      raw, sorted(ran - set(members) - {mover}), sorted(members), mover,
                      sorted(outsiders), ht.pid))
            check(raw not in before_move or mover not in ran,
                  "%s, kept before the move, has sideband records of the mover %d"
                  % (raw, mover))
            strangers = set(procs) - set(members) - {mover}
            check(not strangers, "%s holds the code of %r, not the cgroup's (members %r, "
                  "the mover %d, outside %r, hybtrace %d)" % (
                      raw, sorted(strangers), sorted(members), mover, sorted(outsiders),
                      ht.pid))
            check(raw not in before_move or mover not in procs,
                  "%s, kept before the move, holds the mover %d" % (raw, mover))
        check_own_programs(code, members, "the cgroup's procs_spin")
        check(any(mover in procs for procs in code.values()),
              "no capture after the move holds the mover %d: %r" % (
                  mover, {r: sorted(p) for r, p in code.items()}))
        check_own_programs(code, {mover: "alpha"}, "the mover")


@test
def sideband_mode_follows_every_task_cpu_by_cpu():
    """Sideband test mode, --all: events per CPU of every task. A procs_spin started after
    attach, in no relation to hybtrace, has its processes' code in the captures, each its
    own program; hybtrace's own never."""
    need_root()
    if HAS_PT:
        raise NoHardware("the sideband test mode is for machines without Intel PT")
    with tempfile.TemporaryDirectory() as out:
        stop, log = os.path.join(out, "stop"), os.path.join(out, "log")
        ht = Attached(["--all", "--json", "--source", "pt", "--keep-raw", "--rq-delay",
                       "2ms", "--pre", "60ms", "--dump-policy", "first", "--min-interval",
                       "150ms", "--max-dumps", "30", "--output", out], env=TEST_MODE)
        spin = None
        try:
            ht.wait_attached()
            spin = start_procs_spin(log, stop)
            wait_for(lambda: procs_spin_roles(log), 20, "procs_spin ready")
            roles = procs_spin_roles(log)
            ready = len(glob.glob(os.path.join(out, "*.hybtrace-raw")))
            wait_for(lambda: len(glob.glob(os.path.join(out, "*.hybtrace-raw"))) >= ready + 3,
                     30, "three captures while procs_spin runs")
            open(stop, "w").close()
            spin.wait(30)
            check(ht.stop() == 0, ht.describe())
        finally:
            open(stop, "w").close()
            if spin and spin.poll() is None:
                spin.kill()
                spin.wait()
            ht.close()
        code = captures_code(sorted(glob.glob(os.path.join(out, "*.hybtrace-raw"))))
        mine = [raw for raw, procs in code.items() if ht.pid in procs]
        check(not mine, "%d captures hold hybtrace's own code (pid %d): %r"
              % (len(mine), ht.pid, mine[:2]))
        check_own_programs(code, roles, "procs_spin")


@test
def sideband_mode_threads_past_the_descriptor_limit_are_counted():
    """Sideband test mode (its events are per (thread, CPU), as PT's are): a process of 200
    threads under a descriptor limit of 200 (soft and hard) leaves threads out; one line
    says so at start, and the count is in the JSON summary and in the dump's metadata
    (loss.pt_threads_left_out), never a silent gap."""
    need_root()
    if HAS_PT:
        raise NoHardware("the sideband test mode is for machines without Intel PT")
    with tempfile.TemporaryDirectory() as out:
        env = dict(os.environ, **TEST_MODE)
        storm = subprocess.Popen([workload("thread_storm"), "200", "200", "1500000", "300"],
                                 env=dict(env, HT_WORKLOAD_LOG=os.path.join(out, "log")))
        try:
            wait_for(lambda: len(os.listdir("/proc/%d/task" % storm.pid)) > 200, 10,
                     "thread_storm's threads")
            p = subprocess.run(["prlimit", "--nofile=200:200", HYBTRACE, "--pid",
                                str(storm.pid), "--json", "--source", "pt", "--syscall",
                                "100ms", "--rq-delay", "off", "--max-dumps", "1", "--output",
                                out], capture_output=True, text=True, timeout=60, env=env)
        finally:
            storm.kill()
            storm.wait()
        describe = "rc=%d\nstderr:\n%s" % (p.returncode, p.stderr[-3000:])
        check(p.returncode == 0, describe)
        said = [l for l in p.stderr.splitlines() if "threads left out" in l]
        check(len(said) == 1, "want one line saying what was left out:\n" + describe)
        summary = [o for o in Run(0, p.stdout, "", []).json_lines()
                   if o.get("type") == "summary"]
        check(summary, "no summary: " + describe)
        left = summary[0]["lost"]["source_threads_left_out"]
        check(0 < left <= 200 and (" %d threads left out" % left) in said[0],
              "summary says %r left out, the line %r" % (left, said[0]))
        dumps = glob.glob(os.path.join(out, "*.perfetto-trace"))
        check(dumps, "no dump: " + describe)
        meta = report_json(dumps[0])["metadata"]
        check(meta.get("loss.pt_threads_left_out") == str(left), "the dump counts %r, the "
              "summary %d" % (meta.get("loss.pt_threads_left_out"), left))


@test
def decode_refuses_bad_files_in_one_line():
    need_root()
    with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as dec:
        run = live_pt_run(out, max_dumps=1)
        check(run.rc == 0, run.describe())
        raws = glob.glob(os.path.join(out, "*.hybtrace-raw"))
        check(raws, "no raw capture: " + run.describe())
        with open(raws[0], "rb") as f:
            data = f.read()
        cases = {
            "truncated": data[:len(data) // 2],
            "newer": data[:8] + struct.pack("<H", struct.unpack("<H", data[8:10])[0] + 1)
                     + data[10:],
            "not_raw": b"\x0a\x02hello" * 10,
            "empty": b"",
        }
        for name, content in cases.items():
            path = os.path.join(out, name + ".hybtrace-raw")
            with open(path, "wb") as f:
                f.write(content)
            p = decode(path, dec)
            lines = p.stderr.strip().splitlines()
            check(p.returncode == 2 and len(lines) == 1 and path in lines[0],
                  "%s: rc %d, stderr %r" % (name, p.returncode, p.stderr))
            if name == "newer":
                check("newer" in lines[0], "the refusal should say the file is newer: %r"
                      % lines[0])
        check(not glob.glob(os.path.join(dec, "*")), "files left: %r" % os.listdir(dec))
        p = decode(os.path.join(out, "missing.hybtrace-raw"), dec)
        check(p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1, p.stderr)


@test
def source_pt_without_pt_is_one_clear_line():
    need_root()
    if not HAS_PT:
        run = hybtrace(["run", "--source", "pt", "--", "true"], env={})
        lines = run.stderr.strip().splitlines()
        check(run.rc == 2 and len(lines) == 1 and "no Intel PT" in lines[0], run.describe())
    run = hybtrace(["run", "--keep-raw", "--source", "sample", "--", "true"], env={})
    check(run.rc == 2 and "--keep-raw" in run.stderr, run.describe())
    run = hybtrace(["run", "--pt-size", "3M", "--", "true"], env={})
    check(run.rc == 2 and "power of two" in run.stderr, run.describe())


@test
def real_pt_capture_decodes_call_stacks():
    need_root()
    if not HAS_PT:
        raise NoHardware("no Intel PT on this machine")
    with tempfile.TemporaryDirectory() as out:
        run = live_pt_run(out, env={})
        check(run.rc == 0, run.describe())
        dumps = sorted(glob.glob(os.path.join(out, "*.perfetto-trace")))
        check(dumps, "no dump: " + run.describe())
        r = report_json(dumps[0])
        check(r["metadata"]["on_cpu_source"] == "pt", "%r" % r["metadata"])
        check(TEST_MODE_LINE not in report_text(dumps[0]), "a real capture called a test one")
        check(int(r["metadata"]["pt.instructions"]) > 0, "nothing decoded: %r" % r["metadata"])
        check(int(r["metadata"]["pt.threads"]) >= 1, "%r" % r["metadata"])


@test
def decoded_calls_nest_in_perfetto_as_recorded():
    """A PT dump as Perfetto's own importer nests it: each call of a recorded execution at
    the depth it ran at, main's frame at 0. The unit test that synthesizes the PT of that
    execution (test_pt_dump.c) decodes it and leaves the dump and the recorded depths."""
    trace_processor()
    unit = os.path.join(ROOT, "build", "tests", "test_pt_dump")
    check(os.access(unit, os.X_OK), "%s is missing: make unit" % unit)
    with tempfile.TemporaryDirectory() as keep:
        # Its own check of the file may fail: Perfetto's is the one that counts here.
        p = subprocess.run([unit, "decoded_calls_nest_as_recorded"], capture_output=True,
                           text=True, timeout=300, env=dict(os.environ, HT_PT_DUMP_KEEP=keep))
        dump = os.path.join(keep, "pt.perfetto-trace")
        check(os.path.exists(dump), "%s left no dump: %s" % (unit, p.stdout[-2000:]))
        with open(os.path.join(keep, "calls.txt")) as f:
            want = sorted((name, int(depth)) for name, depth in (l.split() for l in f))
        names = {name for name, _ in want}
        rows = tp_query(dump, "select s.name, s.depth from slice s join thread_track tt "
                        "on tt.id = s.track_id join thread t using (utid) where t.tid = 4242")
        got = sorted((r["name"], r["depth"]) for r in rows if r["name"] in names)
        check(got == want, "Perfetto nests %r, the recording ran %r" % (got, want))
        check_no_import_errors(dump)
        check_global_tracks_have_no_thread(dump)
