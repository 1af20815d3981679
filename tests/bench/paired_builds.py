#!/usr/bin/env python3
"""Two builds of hybtrace against each other, in the same interleaved rounds.

usage: paired_builds.py OLD_HYBTRACE NEW_HYBTRACE [--runs N] [--loops N]

What a change to the hot path costs is a few percent at most, less than a virtual
machine drifts between two `make bench` runs. So both builds are measured in every
round, one after the other, on perf bench sched pipe -T pinned to CPU 0, in the
configurations of `make bench` sections 1 and 2: the benchmark watched itself with
--source none (a) and with every breach kind and sampling on (b), and another, idle
process watched with the defaults (the machine-wide cost every switch pays). Prints each
configuration's new/old ratio: the median of the per-round ratios with its 95% bootstrap
interval. Needs root; an old build without an option used here fails the run.
"""
import argparse
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402


def configs(binary, idle_pid, out):
    """(name, prefix, background) of each configuration measured with BINARY."""
    def run(opts):
        return [binary, "run", "--quiet", "--output", out] + opts + ["--"]

    def watching():
        return bench.Background([binary, "--pid", str(idle_pid), "--quiet", "--json",
                                 "--output", out], r'"type":"attached"')
    return [
        ("self, --source none (a)", run(["--source", "none"]), None),
        ("self, all breaches + sampling (b)",
         run(["--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"]), None),
        ("others, defaults watching an idle process", (), watching),
    ]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--loops", type=int, default=200000)
    args = ap.parse_args()
    for path in (args.old, args.new):
        if not os.access(path, os.X_OK):
            sys.exit("paired_builds: %s is not an executable" % path)
    idle = subprocess.Popen(["sleep", "100000"])
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hybtrace-paired-") as out:
            old = configs(os.path.abspath(args.old), idle.pid, out)
            new = configs(os.path.abspath(args.new), idle.pid, out)
            cmd = bench.pipe_cmd(args.loops)
            for _ in range(args.runs):
                # Old and new side by side, in an order that alternates by round.
                for (name, prefix, bg), (_, new_prefix, new_bg) in zip(old, new):
                    pair = [("old", prefix, bg), ("new", new_prefix, new_bg)]
                    if len(results.get((name, "old"), [])) % 2:
                        pair.reverse()
                    for which, p, b in pair:
                        results.setdefault((name, which), []).append(
                            bench.run_measured(cmd, p, b))
    finally:
        idle.kill()
        idle.wait()
    bench.log("new %s over old %s, %d interleaved rounds of %s" % (
        args.new, args.old, args.runs, " ".join(bench.pipe_cmd(args.loops))))
    for name, _, _ in configs("", 0, ""):
        point, lo, hi = bench.paired_ratio(results[(name, "new")], results[(name, "old")])
        bench.log("  %-44s %.3fx [%.3f, %.3f]" % (name, point, lo, hi))


if __name__ == "__main__":
    main()
