#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The kernel matrix: hybtrace's scenarios on the kernels users run.

Each kernel of kernels.list is fetched as its Debian package (`apt-get download`, only
/boot unpacked, into build/kernels/), booted under qemu with an initramfs that holds
busybox, hybtrace, its shared libraries, the workloads and scenarios.sh; the guest runs the
scenarios and sends their output back through the debug console port; the checks of
checks.py judge it here. The running kernel gets the same scenarios on this machine
(as root). One line per kernel and scenario, then a closing count.

usage: matrix.py [--suite] [--kernels NAME,...] [--only SCENARIO,...] [--jobs N]
  --suite     known defects (checks.KNOWN_DEFECTS) are expected failures: XFAIL lines that
              do not fail the run (`tests/run`); without it they count as failures
  --kernels   only these kernels (names from kernels.list, or "running"; default
              $HT_KERNELS, else all of them)
  --only      only these scenarios
  --jobs      guests booted at a time (default: one per two CPUs of this machine)

Boots use KVM where it can run a stock kernel, TCG elsewhere ($HT_KERNELS_ACCEL=kvm|tcg
forces one). Every boot has a time limit and one retry; a boot that stalls (RCU stall
reports, then no progress) is reported as a stall, never as a pass.
"""
import argparse
import concurrent.futures
import gzip
import io
import os
import re
import shutil
import stat
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
BUILD = os.path.join(ROOT, "build")
KDIR = os.path.join(BUILD, "kernels")
sys.path.insert(0, HERE)
import checks  # noqa: E402

QEMU = "qemu-system-x86_64"
BUSYBOX_PACKAGE = "busybox-static"
# Guest memory: the initramfs, hybtrace's rings (4M flight recorder, 8M dwarf sampling per
# CPU) and the dumps, with room to spare.
GUEST_MEMORY = "1024M"
# A whole boot, and the longest the guest may go without printing anything, before it counts
# as hung. Under TCG one kernel's scenarios take about a minute.
BOOT_LIMIT_S = int(os.environ.get("HT_KERNELS_BOOT_LIMIT_S", "300"))
SILENCE_LIMIT_S = 90
# After an RCU stall report, how long the guest has to show progress again.
STALL_GRACE_S = 60
STALL_RE = re.compile(r"rcu: INFO: \S+ (self-)?detected stall|rcu_\w+ self-detected stall|"
                      r"rcu: INFO: \S+ detected stalls")


def in_ci():
    return os.environ.get("CI") == "true"


def read_kernels():
    out = []
    with open(os.path.join(HERE, "kernels.list")) as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                out.append((line[0], line[1]))
    return out


# --- fetching ------------------------------------------------------------------------------

def deb_of(package):
    """The cached .deb of PACKAGE, downloaded with apt-get into build/kernels/debs."""
    debs = os.path.join(KDIR, "debs")
    os.makedirs(debs, exist_ok=True)

    def cached():
        found = [f for f in os.listdir(debs) if f.startswith(package + "_") and
                 f.endswith(".deb")]
        return os.path.join(debs, sorted(found)[-1]) if found else None

    if not cached():
        p = subprocess.run(["apt-get", "download", package], cwd=debs, capture_output=True,
                           text=True)
        if p.returncode != 0 and os.geteuid() == 0:
            # Package lists that never were fetched (a fresh container) or are stale.
            subprocess.run(["apt-get", "update", "-qq"], capture_output=True)
            p = subprocess.run(["apt-get", "download", package], cwd=debs,
                               capture_output=True, text=True)
        if p.returncode != 0 or not cached():
            raise RuntimeError("apt-get download %s failed (gone from the archive? then a "
                               "newer one goes into tests/kernels/kernels.list): %s" % (
                                   package, (p.stderr.strip().splitlines() or ["?"])[-1]))
    return cached()


def unpack(deb, members, dest):
    """Extract MEMBERS (tar patterns) of DEB's files into DEST; nothing is installed."""
    os.makedirs(dest, exist_ok=True)
    proc = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", deb], stdout=subprocess.PIPE)
    with tarfile.open(fileobj=proc.stdout, mode="r|") as t:
        for m in t:
            if m.isfile() and any(re.fullmatch(p, m.name) for p in members):
                with t.extractfile(m) as src, open(os.path.join(
                        dest, os.path.basename(m.name)), "wb") as dst:
                    shutil.copyfileobj(src, dst)
    proc.stdout.close()
    if proc.wait() != 0:
        raise RuntimeError("dpkg-deb could not read %s" % deb)


def fetch_kernel(name, package):
    """build/kernels/NAME/vmlinuz and config, from PACKAGE."""
    dest = os.path.join(KDIR, name)
    vmlinuz = os.path.join(dest, "vmlinuz")
    if not os.path.exists(vmlinuz):
        tmp = dest + ".tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        unpack(deb_of(package), [r"\./boot/vmlinuz-.*", r"\./boot/config-.*"], tmp)
        for f in os.listdir(tmp):
            os.rename(os.path.join(tmp, f), os.path.join(tmp, f.split("-", 1)[0]))
        check_config(os.path.join(tmp, "config"))
        shutil.rmtree(dest, ignore_errors=True)
        os.rename(tmp, dest)
    return vmlinuz


def check_config(path):
    with open(path) as f:
        config = f.read()
    for option in ("CONFIG_DEBUG_INFO_BTF=y", "CONFIG_SERIAL_8250_CONSOLE=y",
                   "CONFIG_BLK_DEV_INITRD=y", "CONFIG_DEVTMPFS=y"):
        if option not in config:
            raise RuntimeError("the kernel lacks %s" % option)


def fetch_busybox():
    path = os.path.join(KDIR, "busybox")
    if not os.path.exists(path):
        unpack(deb_of(BUSYBOX_PACKAGE), [r"\./bin/busybox"], KDIR)
    return path


# --- the initramfs ---------------------------------------------------------------------------

def shared_libraries(binary):
    """The files `ldd` says BINARY loads, the dynamic loader included."""
    p = subprocess.run(["ldd", binary], capture_output=True, text=True)
    out = []
    for line in p.stdout.splitlines():
        m = re.search(r"(/\S+) \(0x", line)
        if m:
            out.append(m.group(1))
    return out


def cpio_newc(path, entries):
    """Write ENTRIES (name, mode, bytes) as a newc cpio archive, the initramfs format."""
    with open(path, "wb") as f:
        def put(name, mode, data, ino):
            name_bytes = name.encode() + b"\0"
            fields = (ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name_bytes), 0)
            head = b"070701" + b"".join(b"%08x" % v for v in fields) + name_bytes
            f.write(head + b"\0" * (-len(head) % 4))
            f.write(data + b"\0" * (-len(data) % 4))

        for ino, (name, mode, data) in enumerate(entries, 1):
            put(name, mode, data, ino)
        put("TRAILER!!!", 0, b"", 0)


def build_initramfs(plan):
    """build/kernels/initramfs.cpio: busybox, /init, hybtrace, the workloads, the plan."""
    files = {
        "bin/busybox": fetch_busybox(),
        "init": os.path.join(HERE, "init"),
        "ht/scenarios.sh": os.path.join(HERE, "scenarios.sh"),
        "ht/hybtrace": os.path.join(BUILD, "hybtrace"),
        "ht/ht_port": os.path.join(KDIR, "ht_port"),
    }
    wdir = os.path.join(BUILD, "workloads")
    for w in sorted(os.listdir(wdir)):
        files["ht/workloads/" + w] = os.path.join(wdir, w)
    for binary in list(files.values()):
        if os.access(binary, os.X_OK):
            for lib in shared_libraries(binary):
                files[lib.lstrip("/")] = lib
    for f in files.values():
        if not os.path.exists(f):
            raise RuntimeError("%s is missing: run make test-kernels" % f)
    entries = []
    dirs = {"dev", "proc", "sys", "tmp", "etc"}
    for name in files:
        parts = name.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            dirs.add("/".join(parts[:i]))
    for d in sorted(dirs):
        entries.append((d, stat.S_IFDIR | 0o755, b""))
    for name, src in sorted(files.items()):
        with open(src, "rb") as f:
            entries.append((name, stat.S_IFREG | 0o755, f.read()))
    entries.append(("ht/plan", stat.S_IFREG | 0o644, plan.encode()))
    path = os.path.join(KDIR, "initramfs.cpio")
    cpio_newc(path + ".tmp", entries)
    os.rename(path + ".tmp", path)
    return path


# --- booting ---------------------------------------------------------------------------------

def accel():
    """KVM where it runs stock kernels (kvm_intel, kvm_amd), TCG elsewhere: a kvm_pvm host
    only runs PVM guest kernels (stock ones hang before their first line)."""
    forced = os.environ.get("HT_KERNELS_ACCEL")
    if forced:
        return forced
    if os.access("/dev/kvm", os.R_OK | os.W_OK) and (
            os.path.exists("/sys/module/kvm_intel") or os.path.exists("/sys/module/kvm_amd")):
        return "kvm"
    return "tcg"


class Boot:
    """One boot of one kernel: status done, stall, hung, or crashed; what it sent."""

    def __init__(self, status, why, seconds, data):
        self.status = status
        self.why = why
        self.seconds = seconds
        self.data = data


def boot(vmlinuz, initramfs, outdir, attempt):
    console = os.path.join(outdir, "console-%d.log" % attempt)
    data = os.path.join(outdir, "data-%d.bin" % attempt)
    if accel() == "kvm":
        machine = ["-accel", "kvm", "-cpu", "host"]
    else:
        # One host thread for both vCPUs: with a thread each (thread=multi) about one boot in
        # three stalled for good (RCU stall reports, soft lockups, a CPU in int3 right where
        # the kernel patches its text as BPF programs attach), and it was no faster here.
        machine = ["-accel", "tcg,thread=" + os.environ.get("HT_KERNELS_TCG_THREAD", "single"),
                   "-cpu", "max"]
    append = "console=ttyS0 panic=-1 tsc=reliable"
    cmd = [QEMU, "-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
           *machine, "-smp", "2", "-m", GUEST_MEMORY, "-kernel", vmlinuz, "-initrd", initramfs,
           "-append", append, "-serial", "file:" + console,
           "-chardev", "file,id=ht,path=" + data, "-device",
           "isa-debugcon,iobase=0x402,chardev=ht"]
    start = time.monotonic()
    last_change = start
    sizes = (0, 0)
    stall_at = None
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    status = why = None
    try:
        while proc.poll() is None:
            time.sleep(1)
            now = time.monotonic()
            new = tuple(os.path.getsize(p) if os.path.exists(p) else 0 for p in (console, data))
            if new != sizes:
                sizes, last_change = new, now
            text = read_text(console)
            if stall_at is None and STALL_RE.search(text):
                stall_at = now
                progress_at_stall = text.count("\n@@ ")
            if stall_at is not None and now - stall_at > STALL_GRACE_S:
                if text.count("\n@@ ") == progress_at_stall:
                    status, why = "stall", "RCU stall %.0f s into the boot, no progress since" % (
                        stall_at - start)
                    break
                stall_at = None
            if now - start > BOOT_LIMIT_S:
                status, why = "hung", "still running after %d s" % BOOT_LIMIT_S
                break
            if now - last_change > SILENCE_LIMIT_S:
                status, why = "hung", "no output for %d s" % SILENCE_LIMIT_S
                break
    finally:
        if proc.poll() is None:
            proc.kill()
        qemu_out = proc.communicate()[0].decode(errors="replace")
    seconds = time.monotonic() - start
    sent = read_bytes(data)
    if status is None:
        if b"\n@@HTDONE\n" in sent:
            status, why = "done", ""
        elif "Kernel panic" in read_text(console):
            status, why = "crashed", "kernel panic: " + last_lines(read_text(console), 3)
        else:
            status, why = "crashed", "the guest stopped early (qemu %d): %s" % (
                proc.returncode, last_lines(qemu_out + read_text(console), 3))
    return Boot(status, why, seconds, sent)


def read_bytes(path):
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def read_text(path):
    return read_bytes(path).decode(errors="replace")


def last_lines(text, n):
    return " | ".join(l.strip() for l in text.strip().splitlines()[-n:])


def unpack_results(sent, outdir):
    """Each `@@HTDATA NAME SIZE` frame is a gzip'd tar of OUTDIR/NAME."""
    pos = 0
    names = []
    while True:
        pos = sent.find(b"\n@@HTDATA ", pos)
        if pos < 0:
            return names
        eol = sent.find(b"\n", pos + 1)
        if eol < 0:
            return names
        _, name, size = sent[pos + 1:eol].decode().split()
        blob = sent[eol + 1:eol + 1 + int(size)]
        if len(blob) < int(size):
            return names
        with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as t:
            try:
                t.extractall(outdir, filter="data")
            except TypeError:  # a Python without extraction filters
                t.extractall(outdir)
        names.append(name)
        pos = eol + 1 + int(size)


# --- judging ---------------------------------------------------------------------------------

class Tally:
    def __init__(self, suite):
        self.suite = suite
        self.counts = {"PASS": 0, "FAIL": 0, "SKIP": 0, "XFAIL": 0, "XPASS": 0}

    def line(self, verdict, name, text=""):
        self.counts[verdict] += 1
        print("%s kernels:%s%s" % (verdict, name, ": " + text.replace("\n", "\n     ")
                                   if text else ""))
        sys.stdout.flush()

    def closing(self):
        c = self.counts
        failed = c["FAIL"] + (0 if self.suite else c["XFAIL"])
        print()
        extra = []
        if c["XFAIL"]:
            extra.append("%d of them known defects" % c["XFAIL"] if not self.suite else
                         "%d known defects (XFAIL)" % c["XFAIL"])
        if c["XPASS"]:
            extra.append("%d known defects did not show (XPASS)" % c["XPASS"])
        # Inside the suite, whose own count closes its output, this one is a comment.
        print("%s%d passed, %d failed, %d skipped%s" % (
            "# kernels: " if self.suite else "", c["PASS"] + c["XPASS"], failed, c["SKIP"],
            " (" + "; ".join(extra) + ")" if extra else ""))
        return failed == 0


def judge(tally, kernel, outdir, scenarios, why_missing=""):
    info = os.path.join(outdir, "_info")
    if os.path.isdir(info):
        verdict(tally, kernel, checks.MACHINE, info, "")
    elif why_missing:
        tally.line("FAIL", kernel + "/check", why_missing)
    for s in scenarios:
        verdict(tally, kernel, s, os.path.join(outdir, s.run), why_missing)
    dmesg = os.path.join(outdir, "_dmesg", "dmesg")
    if os.path.exists(dmesg):
        with open(dmesg, errors="replace") as f:
            bad = [l for l in f if re.search(r"WARNING:|BUG:|Oops|Call Trace|general protection",
                                              l)]
        if bad:
            tally.line("FAIL", kernel + "/kernel-log", "".join(bad[:8]))
        else:
            tally.line("PASS", kernel + "/kernel-log")


def run_seconds(path):
    """How long the run took on its kernel (guest time, approximate under TCG)."""
    try:
        with open(os.path.join(path, "uptime")) as f:
            t0, t1 = (float(x) for x in f.read().split())
        return " (%.1fs)" % (t1 - t0)
    except (OSError, ValueError):
        return ""


def verdict(tally, kernel, scenario, path, why_missing):
    name = "%s/%s" % (kernel, scenario.name)
    defect = label = what = None
    if scenario.defect and kernel in checks.KNOWN_DEFECTS[scenario.defect][2]:
        defect = scenario.defect
        label, what, _ = checks.KNOWN_DEFECTS[defect]
    if not os.path.isdir(path):
        tally.line("FAIL", name, why_missing or "the scenario did not run")
        return
    # A trigger's hits where the machine never fires a breakpoint: nothing to judge.
    if (kernel == "running" and scenario.run.startswith("trigger") and
            checks.breakpoints_fire() is False):
        tally.line("SKIP", name, "hardware breakpoints do not fire on this machine")
        return
    # A check of another scenario's run: the time is given on that one's line.
    seconds = run_seconds(path) if scenario.run == scenario.name else ""
    try:
        # A check may say what it measured: it is on its PASS line.
        note = scenario.check(checks.Result(path, kernel))
    except checks.Unmet as e:
        tally.line("FAIL", name, str(e)[:3000])
        return
    except checks.Failure as e:
        if defect:
            tally.line("XFAIL", name, "%s (%s): %s" % (label, what, str(e)[:1500]))
        else:
            tally.line("FAIL", name, str(e)[:3000])
        return
    except Exception as e:  # a crash of the check itself is a failure too
        tally.line("FAIL", name, "check crashed: %r" % e)
        return
    if defect:
        tally.line("XPASS", name, "%s did not show%s" % (label, seconds))
    else:
        tally.line("PASS", name + seconds, note or "")


def plan_for(scenarios):
    """The plan lines of the runs SCENARIOS need (a check of another's run needs that run)."""
    runs = {s.run for s in scenarios}
    return "".join(s.plan_line() + "\n" for s in checks.SCENARIOS if s.name in runs)


def boot_kernel(name, package, initramfs):
    """Fetch and boot one kernel, a retry if the first boot does not finish: (lines to
    print, where its results are, why they are missing) or the reason it cannot boot."""
    outdir = os.path.join(KDIR, "results", name)
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    try:
        vmlinuz = fetch_kernel(name, package)
    except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
        return [], None, str(e)
    notes, boots = [], []
    for attempt in (1, 2):
        b = boot(vmlinuz, initramfs, outdir, attempt)
        boots.append(b)
        notes.append("# %s boot %d (%s): %s in %.0f s%s" % (
            name, attempt, accel(), b.status, b.seconds, ": " + b.why if b.why else ""))
        if b.status == "done":
            break
    last = boots[-1]
    got = os.path.join(outdir, "got")
    unpack_results(last.data, got)
    why = ""
    if last.status != "done":
        why = "%s: %s (boots: %s)" % ("stalled" if last.status == "stall" else last.status,
                                      last.why, ", ".join(b.status for b in boots))
    return notes, got, why


def run_guests(tally, guests, scenarios, jobs):
    """Boot the kernels, JOBS at a time, then judge each one's results in the order of
    kernels.list."""
    try:
        initramfs = build_initramfs(plan_for(scenarios))
    except (RuntimeError, subprocess.CalledProcessError, OSError) as e:
        for name, _ in guests:
            tally.line("FAIL" if in_ci() else "SKIP", name, str(e))
        return
    start = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        booted = [pool.submit(boot_kernel, name, package, initramfs)
                  for name, package in guests]
        for (name, _), future in zip(guests, booted):
            notes, got, why = future.result()
            for line in notes:
                print(line)
            if got is None:
                tally.line("FAIL" if in_ci() else "SKIP", name, why)
                continue
            judge(tally, name, got, scenarios, why)
    print("# %d kernels booted in %.0f s" % (len(guests), time.monotonic() - start))


def run_here(tally, scenarios):
    """The running kernel: the same scenarios on this machine, as root."""
    if os.geteuid() != 0:
        tally.line("FAIL" if in_ci() else "SKIP", "running", "needs root for BPF")
        return
    outdir = os.path.join(KDIR, "results", "running")
    shutil.rmtree(outdir, ignore_errors=True)
    got = os.path.join(outdir, "got")
    os.makedirs(got)
    plan = os.path.join(outdir, "plan")
    with open(plan, "w") as f:
        f.write(plan_for(scenarios))
    env = dict(os.environ)
    env.pop("HT_SEND", None)
    start = time.monotonic()
    subprocess.run(["sh", os.path.join(HERE, "scenarios.sh"), plan, BUILD, got], env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=1800)
    print("# running (%s): scenarios in %.0f s" % (os.uname().release, time.monotonic() - start))
    judge(tally, "running", got, scenarios)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--suite", action="store_true")
    ap.add_argument("--kernels")
    ap.add_argument("--only")
    # Each TCG guest keeps a host CPU busy; the host needs one too.
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 1) // 2))
    args = ap.parse_args()
    tally = Tally(args.suite)
    only = args.only.split(",") if args.only else None
    scenarios = [s for s in checks.SCENARIOS if not only or s.name in only]
    kernels = read_kernels()
    chosen = args.kernels or os.environ.get("HT_KERNELS")
    wanted = chosen.split(",") if chosen else [k for k, _ in kernels] + ["running"]
    unknown = sorted(set(only or []) - {s.name for s in checks.SCENARIOS}) + sorted(
        set(wanted) - {k for k, _ in kernels} - {"running"})
    if unknown:
        print("matrix.py: no scenario or kernel called %s (see tests/kernels/checks.py and "
              "kernels.list)" % ", ".join(unknown), file=sys.stderr)
        return 2
    guests = [(k, p) for k, p in kernels if k in wanted]
    if guests and not shutil.which(QEMU):
        for k, _ in guests:
            tally.line("FAIL" if in_ci() else "SKIP", k,
                       "%s is not installed (make kernel-deps installs it)" % QEMU)
        guests = []
    # The running kernel first: its scenarios want the machine to themselves.
    if "running" in wanted:
        run_here(tally, scenarios)
    if guests:
        run_guests(tally, guests, scenarios, args.jobs)
    return 0 if tally.closing() else 1


if __name__ == "__main__":
    sys.exit(main())
