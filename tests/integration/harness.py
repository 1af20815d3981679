# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Integration-test helpers: run hybtrace for real, read workloads' ground truth.

Each test is a function decorated with @test; run_all.py runs them one at a
time (scenarios pin CPUs) and prints one line per test:
    PASS name | FAIL name: reason | SKIP name: reason
A test that needs root says SKIP without it, except under CI=true, where it
fails: CI runs as root on a machine where BPF works.
"""
import json
import os
import subprocess
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HYBTRACE = os.path.join(ROOT, "build", "hybtrace")
WORKLOADS = os.path.join(ROOT, "build", "workloads")

TESTS = []


class Skip(Exception):
    """Raised by a test that cannot run here, with the reason."""


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


def check(cond, message):
    if not cond:
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
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def breaches(self, kind=None):
        return [o for o in self.json_lines()
                if o.get("type") == "breach" and (kind is None or o["kind"] == kind)]

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
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line:
                out.append(json.loads(line))
    return out


def hybtrace(args, timeout=60, env=None, stdin=None):
    """Run hybtrace with ARGS; the workload it starts logs to a fresh file."""
    with tempfile.TemporaryDirectory() as tmp:
        log = os.path.join(tmp, "workload.log")
        e = dict(os.environ)
        e["HT_WORKLOAD_LOG"] = log
        e.update(env or {})
        # Dumps a test does not direct elsewhere land in the temporary directory.
        p = subprocess.run([HYBTRACE] + args, capture_output=True, text=True,
                           timeout=timeout, env=e, stdin=stdin, cwd=tmp)
        return Run(p.returncode, p.stdout, p.stderr, read_log(log))


def our_bpf_links():
    """Links of hybtrace's programs still attached (bpftool link), by program name."""
    p = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True)
    if p.returncode != 0:
        return []
    try:
        links = json.loads(p.stdout or "[]")
    except ValueError:
        return []
    progs = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    names = {}
    try:
        for prog in json.loads(progs.stdout or "[]"):
            names[prog["id"]] = prog.get("name", "")
    except ValueError:
        pass
    return [l for l in links if names.get(l.get("prog_id"), "").startswith("handle_")]


def wait_for(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise Failure("timed out waiting for " + what)
