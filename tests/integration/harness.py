# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration-test helpers: run hybtrace for real, read workloads' ground truth.

Each test is a function decorated with @test; run_all.py runs them one at a
time (scenarios pin CPUs) and prints one line per test:
    PASS name | FAIL name: reason | SKIP name: reason
A test that needs root says SKIP without it, except under CI=true, where it
fails: CI runs as root on a machine where BPF works.
"""
import csv
import ctypes
import json
import os
import re
import shutil
import struct
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HYBTRACE = os.path.join(ROOT, "build", "hybtrace")
WORKLOADS = os.path.join(ROOT, "build", "workloads")

TESTS = []

# perf_event_open(2) for breakpoints_fire(): x86-64's syscall, struct perf_event_attr's first
# fields (PERF_ATTR_SIZE_VER5) and the bits of its flags word.
SYS_PERF_EVENT_OPEN = 298
PERF_ATTR_SIZE = 112
PERF_TYPE_BREAKPOINT = 5
HW_BREAKPOINT_X = 4
ATTR_EXCLUDE_KERNEL = 1 << 5
ATTR_EXCLUDE_HV = 1 << 6
PERF_FLAG_FD_CLOEXEC = 8


class Skip(Exception):
    """Raised by a test that cannot run here, with the reason."""


class NoHardware(Skip):
    """A test of hardware this machine lacks (Intel PT): a skip even under CI, which has no
    say over the hardware it is given."""


class NoTool(NoHardware):
    """Perfetto's trace processor is absent: no registry installs it, so a clone without
    ../shared skips everywhere, as for hardware the machine lacks."""


class Failure(AssertionError):
    """A broken expectation, with what was seen."""


def test(fn):
    TESTS.append(fn)
    return fn


def in_ci():
    return os.environ.get("CI") == "true"


def need_root():
    if os.geteuid() != 0:
        raise Skip("needs root for BPF")


# Where a failing check keeps the dumps and captures its message names, before the test's
# temporary directories go: a rare failure is a bug to find, and its dump is the evidence.
FAILED_DIR = os.environ.get("HT_FAILED_DIR", os.path.join(tempfile.gettempdir(),
                                                          "hybtrace-failed"))
KEPT_SUFFIXES = (".perfetto-trace", ".hybtrace-raw")
KEPT_PER_FAILURE = 4


def keep_evidence(message):
    """Copy the dumps MESSAGE names that still exist into FAILED_DIR; what was kept."""
    kept = []
    for path in re.findall(r"(/[^\s'\":,()\[\]]+)", message):
        if not path.endswith(KEPT_SUFFIXES) or not os.path.isfile(path) or path in kept:
            continue
        if len(kept) == KEPT_PER_FAILURE:
            break
        try:
            os.makedirs(FAILED_DIR, exist_ok=True)
            shutil.copy(path, os.path.join(FAILED_DIR, "%d-%s" % (
                time.time_ns(), os.path.basename(path))))
            kept.append(path)
        except OSError:
            pass
    return kept


def check(cond, message):
    if not cond:
        if keep_evidence(message):
            message += "\n(the dumps named are kept in %s)" % FAILED_DIR
        raise Failure(message)


def workload(name):
    return os.path.join(WORKLOADS, name)


def tolerance_ns(duration_ns):
    """The margin a loaded 2-core VM needs: max(10% of the interval, 200 us)."""
    return max(duration_ns // 10, 200_000)


class Run:
    """A finished hybtrace run: exit status, output, and the workload's log."""

    def __init__(self, rc, stdout, stderr, log):
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        self.log = log

    def json_lines(self):
        out = []
        text = self.stdout
        # Read while hybtrace writes: a last line without its newline is not whole yet.
        if text and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def breaches(self, kind=None):
        out = [o for o in self.json_lines()
               if o.get("type") == "breach" and (kind is None or o["kind"] == kind)]
        # Whatever a test looks for, no breach may end before it began.
        bad = [b for b in out if b["end_ns"] < b["start_ns"]]
        if bad:
            raise Failure("a breach ends before it begins: %r" % bad[0])
        return out

    def summary(self):
        for o in self.json_lines():
            if o.get("type") == "summary":
                return o
        return None

    def events(self, name):
        return [e for e in self.log if e["event"] == name]

    def describe(self):
        return "rc=%d\nstdout:\n%s\nstderr:\n%s" % (
            self.rc, self.stdout[-3000:], self.stderr[-2000:])


def read_log(path):
    """The workload's log as far as it is written: a line still being written (no newline
    yet, read while the workload runs) is left for the next read."""
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            if not line.endswith("\n"):
                break
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def rules():
    """sched_rules.py, imported on first use: it imports this module."""
    import sched_rules

    return sched_rules


def output_dirs(args, cwd):
    """Where a hybtrace run with ARGS in CWD leaves its dumps: --output's directory, else
    CWD."""
    for i, a in enumerate(args):
        if a in ("--output", "-o") and i + 1 < len(args):
            return [os.path.join(cwd, args[i + 1])]
        if a.startswith("--output="):
            return [os.path.join(cwd, a.split("=", 1)[1])]
        if a == "--":
            break
    return [cwd]


def dumps_before(args, cwd):
    """The dumps where a run with ARGS in CWD will leave its own, before it runs."""
    return rules().dumps_now(output_dirs(args, cwd))


def check_new_dumps(args, cwd, before=None):
    """Every dump a run made (not in BEFORE, dumps_before()), against Perfetto's import rules
    (sched_rules.py), before the directory it lies in goes away."""
    rules().check_dumps_in(output_dirs(args, cwd), before)


def hybtrace(args, timeout=60, env=None, stdin=None):
    """Run hybtrace with ARGS; the workload it starts logs to a fresh file."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "workload.log")
        e = dict(os.environ)
        e["HT_WORKLOAD_LOG"] = log
        e.update(env or {})
        # Dumps a test does not direct elsewhere land in the temporary directory.
        before = dumps_before(args, tmp)
        p = subprocess.run([HYBTRACE] + args, capture_output=True, text=True,
                           timeout=timeout, env=e, stdin=stdin, cwd=tmp)
        check_new_dumps(args, tmp, before)
        return Run(p.returncode, p.stdout, p.stderr, read_log(log))


# Some kernels (this machine's) hand a CPU over from a few tasks without the sched_switch
# tracepoint, and the wakeup of the task they take in goes untraced with it: a wait chain says
# so at that stretch ("switched in untraced"), where no waker can be known.
UNTRACED_STOP = "switched in untraced"


def chains_fully_traced(chains, what):
    """CHAINS (live chain lines) but those in which the kernel switched a task in untraced,
    which must be few: one, or one in ten."""
    hidden = [c for c in chains
              if any(s.get("stop") == UNTRACED_STOP for s in c["chain"]["stretches"])]
    check(len(hidden) <= max(1, len(chains) // 10),
          "%s: the kernel switched a task in untraced in %d of %d chains: %r"
          % (what, len(hidden), len(chains), hidden[:2]))
    return [c for c in chains if c not in hidden]


def report_json(path):
    """`hybtrace report --json PATH`, parsed; the report must succeed. A dump the suite made
    is checked against Perfetto's import rules first, wherever it came from."""
    if os.path.isdir(path):
        rules().check_dumps_in([path])
    elif path.endswith(".perfetto-trace"):
        rules().check_dump_once(path)
    p = subprocess.run([HYBTRACE, "report", "--json", path], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "report %s failed: %s" % (path, p.stderr))
    return json.loads(p.stdout)


def bpf_map_ids(pid):
    """The ids of the BPF maps process PID holds, from its fds' fdinfo."""
    ids = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            if os.readlink("/proc/%d/fd/%s" % (pid, fd)) != "anon_inode:bpf-map":
                continue
            with open("/proc/%d/fdinfo/%s" % (pid, fd)) as f:
                ids.update(int(l.split()[1]) for l in f if l.startswith("map_id:"))
        except OSError:
            continue
    return ids


def bpftool_json(*args):
    """`bpftool -j ARGS`, parsed. A bpftool that fails or prints what is not JSON fails the
    test: an empty answer would make every "nothing left attached" check pass."""
    p = subprocess.run(["bpftool", "-j"] + list(args), capture_output=True, text=True,
                       timeout=60)
    check(p.returncode == 0, "bpftool %s exited with %d: %s" % (" ".join(args), p.returncode,
                                                               p.stderr.strip()))
    try:
        return json.loads(p.stdout)
    except ValueError as e:
        raise Failure("bpftool %s printed what is not JSON (%s): %r"
                      % (" ".join(args), e, p.stdout[:200]))


def our_bpf_links():
    """Links of hybtrace's programs still attached (bpftool link), each with its prog_name."""
    links = bpftool_json("link", "show")
    names = {prog["id"]: prog.get("name", "") for prog in bpftool_json("prog", "show")}
    return [dict(l, prog_name=names[l["prog_id"]]) for l in links
            if names.get(l.get("prog_id"), "").startswith("handle_")]


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise Failure("timed out waiting for " + what)


class Control:
    """The files a workload waits for (tests/workloads/workload.h), in a fresh directory:
    with START, it begins its scenario only once start() is called; with STOP, what it
    would do for a count of rounds or seconds goes on until stop() is called. A test
    starts a workload once hybtrace says it is attached, and stops it once it has done
    what it needs, instead of sleeping a fixed time and racing the workload's own end."""

    def __init__(self, start=False, stop=False):
        self.dir = tempfile.mkdtemp(prefix="hybtrace-control-")
        self.start_file = os.path.join(self.dir, "start")
        self.stop_file = os.path.join(self.dir, "stop")
        self.env = {}
        if start:
            self.env["HT_START_FILE"] = self.start_file
        if stop:
            self.env["HT_STOP_FILE"] = self.stop_file

    def start(self):
        open(self.start_file, "w").close()

    def stop(self):
        open(self.stop_file, "w").close()

    def close(self):
        """Release whatever still waits, then clean up."""
        self.start()
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def whole_lines(path):
    """The JSON lines PATH holds so far, leaving out one still being written."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        text = f.read()
    return [json.loads(l) for l in text[:text.rfind("\n") + 1].splitlines() if l.strip()]


ARMED = re.compile(r"^hybtrace: trigger .* at (0x[0-9a-f]+) in .* armed$")


def armed_addresses(stderr):
    """The addresses hybtrace said it armed a trigger at (its stderr)."""
    return {int(m.group(1), 16) for m in map(ARMED.match, stderr.splitlines()) if m}


class Go:
    """Answers trigger_target's "ready" lines: once hybtrace said it armed a trigger at the
    address of each function a line names (of those in FUNCTIONS, all by default), the start
    file the workload waits for is made (again for the image after an exec, which took the
    first one away). hybtrace may have armed the address in an image before (the child it
    holds before exec, the image before an exec): with address randomization, as wherever
    the tests run, never at the same address."""

    def __init__(self, control, log, functions=None):
        self.control = control
        self.log = log
        self.functions = functions
        self.answered = 0

    def poll(self, stderr):
        readies = [e for e in whole_lines(self.log) if e["event"] == "ready"]
        armed = armed_addresses(stderr)
        while self.answered < len(readies) and all(
                int(a, 16) in armed for f, a in readies[self.answered]["at"].items()
                if self.functions is None or f in self.functions):
            self.control.start()
            self.answered += 1


def run_answering(ht, go, timeout):
    """Wait for hybtrace (Attached) to exit, answering the workload's "ready" lines."""
    def done():
        go.poll(ht.stderr())
        return ht.proc.poll() is not None

    try:
        wait_for(done, timeout, "hybtrace and its workload to finish (%d ready lines "
                 "answered)\n%s" % (go.answered, ht.describe()))
        return Run(ht.proc.returncode, ht.stdout(), ht.stderr(), whole_lines(go.log))
    finally:
        ht.close()


def check_rows(text):
    """The rows of `hybtrace check`'s table: name -> (yes or no, what it says)."""
    rows = {}
    for line in text.split("\n\n")[1].splitlines() if "\n\n" in text else []:
        parts = [p.strip() for p in line.split("  ") if p.strip()]
        if len(parts) >= 2:
            rows.setdefault(parts[0], (parts[1].split()[0], " ".join(parts[1:])))
    return rows


def cpu_seconds_of(pid):
    """CPU time process PID has used so far (all its threads); 0 once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Attached:
    """hybtrace running in the background (with --json): watch its output while it runs.
    WRAP: a command that runs it (without_caps CAPS)."""

    def __init__(self, args, cwd=None, env=None, wrap=None):
        self.dir = tempfile.TemporaryDirectory()
        self.out_path = os.path.join(self.dir.name, "stdout")
        self.err_path = os.path.join(self.dir.name, "stderr")
        e = dict(os.environ)
        e.update(env or {})
        self.dump_dirs = output_dirs(args, cwd or self.dir.name)
        self.dumps_before = dumps_before(args, cwd or self.dir.name)
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(list(wrap or []) + [HYBTRACE] + args, stdout=out,
                                         stderr=err,
                                         cwd=cwd or self.dir.name, env=e)
        self.rusage = None
        self.rc = None
        self.kept = None  # (stdout, stderr) once closed

    @property
    def pid(self):
        return self.proc.pid

    def stdout(self):
        if self.kept:
            return self.kept[0]
        with open(self.out_path) as f:
            return f.read()

    def stderr(self):
        if self.kept:
            return self.kept[1]
        with open(self.err_path) as f:
            return f.read()

    def json_lines(self):
        return Run(0, self.stdout(), "", []).json_lines()

    def breaches(self, kind=None):
        return Run(0, self.stdout(), "", []).breaches(kind)

    def summary(self):
        return Run(0, self.stdout(), "", []).summary()

    def attached(self):
        """hybtrace's word that monitoring has begun: the attached JSON line (--json), or
        the "watching" line on stderr; None before it."""
        for o in self.json_lines():
            if o.get("type") == "attached":
                return o
        if "--json" not in self.proc.args and "hybtrace: watching " in self.stderr():
            return {"type": "attached"}
        return None

    def wait_attached(self, timeout_s=30):
        wait_for(lambda: self.proc.poll() is not None or self.attached(),
                 timeout_s, "hybtrace to attach")
        check(self.proc.poll() is None, "hybtrace exited early:\n" + self.describe())
        return self.attached()

    def stop(self, sig=2, timeout_s=60):
        """Send SIG (SIGINT by default) unless it has exited; wait, keeping its rusage."""
        if self.proc.poll() is None and sig:
            self.proc.send_signal(sig)
        return self.wait(timeout_s)

    def wait(self, timeout_s=60):
        deadline = time.monotonic() + timeout_s
        while self.rc is None:
            pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
            if pid:
                self.rc = os.waitstatus_to_exitcode(status)
                self.rusage = usage
                self.proc.returncode = self.rc
                # Exited: every dump it made is whole (each is renamed into place).
                rules().check_dumps_in(self.dump_dirs, self.dumps_before)
                break
            if time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise Failure("hybtrace did not exit:\n" + self.describe())
            time.sleep(0.02)
        return self.rc

    def cpu_seconds(self):
        return self.rusage.ru_utime + self.rusage.ru_stime

    def describe(self):
        return "rc=%s\nstdout:\n%s\nstderr:\n%s" % (self.rc, self.stdout()[-3000:],
                                                     self.stderr()[-2000:])

    def close(self):
        """Kill it if it still runs; what it wrote stays readable. Once it exited by itself,
        the dumps it made are checked (wait() does it for a run it waited for)."""
        exited = self.rc is None and self.proc.poll() is not None
        if self.proc.poll() is None and self.rc is None:
            self.proc.kill()
            self.proc.wait()
        try:
            if exited and not self.kept:
                rules().check_dumps_in(self.dump_dirs, self.dumps_before)
        finally:
            if not self.kept:
                self.kept = (self.stdout(), self.stderr())
                self.dir.cleanup()


_BREAKPOINTS_FIRE = []


def breakpoints_fire():
    """Whether hardware breakpoints fire on this machine, as the kernel counts them: an
    execute breakpoint on libc's getppid for this thread, called a few times. None when
    none can be opened here (no say). Some virtual machines take the event and never
    deliver a hit: a test that needs one then has nothing to test."""
    if not _BREAKPOINTS_FIRE:
        libc = ctypes.CDLL(None, use_errno=True)
        attr = bytearray(PERF_ATTR_SIZE)
        struct.pack_into("<IIQ", attr, 0, PERF_TYPE_BREAKPOINT, PERF_ATTR_SIZE, 0)
        struct.pack_into("<Q", attr, 40, ATTR_EXCLUDE_KERNEL | ATTR_EXCLUDE_HV)
        struct.pack_into("<II", attr, 48, 0, HW_BREAKPOINT_X)
        struct.pack_into("<QQ", attr, 56, ctypes.cast(libc.getppid, ctypes.c_void_p).value,
                         ctypes.sizeof(ctypes.c_long))
        buf = ctypes.create_string_buffer(bytes(attr), PERF_ATTR_SIZE)
        fd = libc.syscall(SYS_PERF_EVENT_OPEN, buf, 0, -1, -1, PERF_FLAG_FD_CLOEXEC)
        if fd < 0:
            _BREAKPOINTS_FIRE.append(None)
        else:
            for _ in range(4):
                libc.getppid()
            count = struct.unpack("<Q", os.read(fd, 8))[0]
            os.close(fd)
            _BREAKPOINTS_FIRE.append(count > 0)
    return _BREAKPOINTS_FIRE[0]


def need_breakpoints():
    """A test of what a trigger's hit does: a skip, even under CI, where none fires."""
    if breakpoints_fire() is False:
        raise NoHardware("hardware breakpoints do not fire on this machine (the kernel takes "
                         "one and never counts a hit: a virtual machine without the debug "
                         "registers)")


def trace_processor():
    """Perfetto's own importer: $TRACE_PROCESSOR, else ../shared/tools/ beside the project."""
    path = os.environ.get("TRACE_PROCESSOR") or os.path.join(
        ROOT, "..", "shared", "tools", "trace_processor_shell")
    if not os.access(path, os.X_OK):
        raise NoTool("Perfetto's trace_processor_shell is absent (%s; set TRACE_PROCESSOR)" % path)
    return path


def tp_query(trace, sql):
    """Rows of SQL over TRACE as Perfetto reads it: dicts of ints, strings and None (NULL)."""
    p = subprocess.run([trace_processor(), "query", trace, sql], capture_output=True, text=True,
                       timeout=120)
    check(p.returncode == 0, "trace_processor_shell on %s failed (%s):\n%s"
          % (trace, sql, p.stderr[-2000:]))
    rows = []
    for row in csv.DictReader(p.stdout.splitlines()):
        rows.append({k: None if v == "[NULL]" else int(v) if v.lstrip("-").isdigit() else v
                     for k, v in row.items()})
    return rows


def pb_varint(data, i):
    """The varint at DATA[I]: (its value, the index after it)."""
    v = shift = 0
    while True:
        b = data[i]
        i += 1
        v |= (b & 0x7f) << shift
        shift += 7
        if b < 0x80:
            return v, i


def pb_fields(data):
    """(field number, wire type, value) of each field of one protobuf message: an int for
    varints and fixed widths, bytes for length-delimited fields."""
    i, n = 0, len(data)
    while i < n:
        key, i = pb_varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = pb_varint(data, i)
            yield number, wire, value
        elif wire == 1:
            yield number, wire, int.from_bytes(data[i:i + 8], "little")
            i += 8
        elif wire == 2:
            size, i = pb_varint(data, i)
            yield number, wire, data[i:i + size]
            i += size
        elif wire == 5:
            yield number, wire, int.from_bytes(data[i:i + 4], "little")
            i += 4
        else:
            raise Failure("protobuf wire type %d at byte %d" % (wire, i))


def trace_packets(path):
    """Each TracePacket of a Perfetto trace file, as its list of pb_fields."""
    with open(path, "rb") as f:
        data = f.read()
    return [list(pb_fields(value)) for number, wire, value in pb_fields(data)
            if number == 1 and wire == 2]


_KNOWN_OPTIONS = {}

# For each option a command line with it that is bad input whether or not hybtrace has it.
OPTION_PROBES = {
    "--children": ["--children", "--pid", "0"],
    "--cgroup": ["--cgroup", "/nonexistent/hybtrace-probe"],
    "--all": ["--all", "--pid", "0"],
}


def hybtrace_knows(option):
    """Whether hybtrace takes OPTION, of OPTION_PROBES. Its probe is bad input either way
    (exit 2, nothing attached): only the message tells an option hybtrace does not know
    ("bad option '--x'") from one it refuses there."""
    if option not in _KNOWN_OPTIONS:
        try:
            p = subprocess.run([HYBTRACE] + OPTION_PROBES[option], capture_output=True,
                               text=True, timeout=20)
            _KNOWN_OPTIONS[option] = "bad option '%s'" % option not in p.stderr
        except subprocess.TimeoutExpired:
            # It took the line and ran: it knows the option (and the probe was not bad input).
            _KNOWN_OPTIONS[option] = True
    return _KNOWN_OPTIONS[option]


def cgroup_mounts(fstype):
    """Mount points of file systems of FSTYPE, from /proc/self/mountinfo."""
    points = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields, _, rest = line.partition(" - ")
            if rest.split()[0] == fstype:
                points.append(fields.split()[4].replace("\\040", " "))
    return points


def cgroup_v2_mount():
    """Where cgroup v2 is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified where a machine
    mounts both versions (hybrid); None without one."""
    return (cgroup_mounts("cgroup2") or [None])[0]


def own_cgroup_v2():
    """The cgroup v2 directory this process is in (its "0::" line), absolute."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            if line.startswith("0::"):
                return os.path.join(cgroup_v2_mount(), line[3:].strip().lstrip("/"))
    raise Skip("this process has no cgroup v2 line in /proc/self/cgroup")


def remove_cgroup_tree(top, empty=lambda d: None, timeout_s=10):
    """Remove cgroup directory TOP and those below it, deepest first, EMPTY(d) before each
    try (a process that just exited may hold its cgroup a moment: retried)."""
    dirs = sorted((os.path.join(d, s) for d, subs, _ in os.walk(top) for s in subs),
                  key=len, reverse=True) + [top]
    for d in dirs:
        deadline = time.monotonic() + timeout_s
        while os.path.isdir(d):
            try:
                empty(d)
                os.rmdir(d)
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)


class Cgroup:
    """A cgroup v2 directory a test makes under the v2 mount (SUBDIRS beneath it), with the
    time of each move in or out; removed at the end, once whatever is left in it has been
    moved back to the test's own cgroup."""

    def __init__(self, subdirs=(), prefix="hybtrace-test"):
        mount = cgroup_v2_mount()
        if not mount:
            raise Skip("no cgroup v2 mount in /proc/self/mountinfo")
        self.mount = mount
        self.home = own_cgroup_v2()
        self.name = "%s-%d" % (prefix, os.getpid())
        self.path = os.path.join(mount, self.name)
        if os.path.isdir(self.path):
            self.remove()
        os.mkdir(self.path)
        self.dirs = [self.path]
        for sub in subdirs:
            self.dirs.append(os.path.join(self.path, sub))
            os.mkdir(self.dirs[-1])

    def dir(self, sub=None):
        return os.path.join(self.path, sub) if sub else self.path

    def move(self, pid, path):
        """Move process PID into cgroup PATH: the monotonic times just before and just after
        the write, between which the kernel moved it."""
        before_ns = time.monotonic_ns()
        with open(os.path.join(path, "cgroup.procs"), "w") as f:
            f.write("%d\n" % pid)
        return before_ns, time.monotonic_ns()

    def procs(self, path=None):
        with open(os.path.join(path or self.path, "cgroup.procs")) as f:
            return [int(l) for l in f if l.strip()]

    def join(self):
        """For preexec_fn: the forked child moves itself in before it execs."""
        with open(os.path.join(self.path, "cgroup.procs"), "w") as f:
            f.write("0\n")

    def remove(self, timeout_s=10):
        """Move what is left back home, then remove the directories, deepest first."""
        def empty(d):
            for pid in self.procs(d):
                try:
                    self.move(pid, self.home)
                except OSError:
                    pass  # gone meanwhile

        remove_cgroup_tree(self.path, empty, timeout_s)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def proc_status(pid, *keys):
    """Fields of /proc/PID/status in kB (VmRSS, RssAnon...): {key: int}; {} once it is gone."""
    try:
        with open("/proc/%d/status" % pid) as f:
            return {l.split(":")[0]: int(l.split()[1]) for l in f
                    if l.split(":")[0] in keys}
    except OSError:
        return {}


def open_fds(pid):
    """The descriptors process PID holds; None once it is gone."""
    try:
        return len(os.listdir("/proc/%d/fd" % pid))
    except OSError:
        return None
