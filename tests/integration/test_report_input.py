# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""`hybtrace report` on files it did not write: one clear line, exit 2, never a crash or hang;
and on dumps earlier versions wrote: what it said of them then."""
import difflib
import glob
import os
import random
import subprocess
import tempfile

from harness import HYBTRACE, ROOT, check, hybtrace, need_root, test, workload

FIXTURES = os.path.join(ROOT, "tests", "fixtures", "dumps")


def expect_rejected(data, what):
    with tempfile.NamedTemporaryFile(suffix=".perfetto-trace") as f:
        if data is not None:
            f.write(data)
            f.flush()
        path = f.name if data is not None else f.name + ".missing"
        p = subprocess.run([HYBTRACE, "report", path], capture_output=True, text=True,
                           timeout=20)
    err = p.stderr.strip()
    check(p.returncode == 2, "%s: rc %d (%s)" % (what, p.returncode, err))
    check(err and "\n" not in err, "%s: want one line on stderr, got %r" % (what, p.stderr))
    check(not p.stdout.strip(), "%s: nothing belongs on stdout" % what)


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


@test
def report_rejects_bad_files():
    expect_rejected(None, "a missing file")
    expect_rejected(b"", "an empty file")
    with open("/bin/true", "rb") as f:
        expect_rejected(f.read(4096), "an ELF file")
    expect_rejected(b"hello, this is text\n" * 20, "a text file")
    rng = random.Random(1234)
    for i in range(20):
        expect_rejected(bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 4096))),
                        "random bytes #%d" % i)
    # Trace.packet (field 1, length-delimited) claiming far more than the file holds.
    expect_rejected(b"\x0a" + varint(1 << 40) + b"\x00" * 16, "a length beyond the file")
    # Nesting deeper than any writer makes: messages inside messages inside ...
    deep = b""
    for _ in range(200):
        deep = b"\x0a" + varint(len(deep)) + deep
    expect_rejected(deep, "deep nesting")


@test
def report_rejects_a_truncated_dump():
    need_root()
    with tempfile.TemporaryDirectory() as out:
        run = hybtrace(["run", "--syscall", "10ms", "--output", out, "--quiet",
                        "--", workload("sleeper"), "15", "1"])
        check(run.rc == 0, run.describe())
        dumps = [os.path.join(out, f) for f in os.listdir(out)]
        check(dumps, "no dump written")
        with open(dumps[0], "rb") as f:
            data = f.read()
    for cut in (len(data) // 3, len(data) // 2, len(data) - 1):
        expect_rejected(data[:cut], "a dump cut at %d of %d bytes" % (cut, len(data)))


@test
def report_usage_errors():
    p = subprocess.run([HYBTRACE, "report"], capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr)
    p = subprocess.run([HYBTRACE, "report", "--bogus", "x"], capture_output=True, text=True)
    check(p.returncode == 2 and p.stderr.strip().count("\n") == 0, p.stderr)


@test
def report_reads_dumps_of_earlier_versions():
    """Dumps written before they held native scheduling data (tests/fixtures/dumps/README.md):
    `report` and `report --json` print what they printed when the dumps were written."""
    traces = sorted(glob.glob(os.path.join(FIXTURES, "*.perfetto-trace")))
    check(len(traces) >= 3, "fixtures missing in %s: %r" % (FIXTURES, traces))
    for path in traces:
        name = os.path.basename(path)
        stem = name[:-len(".perfetto-trace")]
        for args, suffix in ((["report"], ".report.txt"), (["report", "--json"], ".report.json")):
            p = subprocess.run([HYBTRACE] + args + [name], cwd=FIXTURES, capture_output=True,
                               text=True, timeout=60)
            check(p.returncode == 0, "%s %s: rc %d: %s" % (" ".join(args), name, p.returncode,
                                                          p.stderr))
            with open(os.path.join(FIXTURES, stem + suffix)) as f:
                want = f.read()
            diff = "".join(difflib.unified_diff(want.splitlines(True), p.stdout.splitlines(True),
                                                "then", "now", n=1))
            check(p.stdout == want, "%s %s differs:\n%s" % (" ".join(args), name, diff[:3000]))
