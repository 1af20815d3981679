#!/usr/bin/env python3
"""Two builds of hybtrace against each other, in the same interleaved rounds.

usage: paired_builds.py OLD_HYBTRACE NEW_HYBTRACE [--runs N] [--loops N] [--programs
                         [--cgroup]] [--old-env NAME=VALUE]...

What a change to the hot path costs is a few percent at most, less than a virtual
machine drifts between two `make bench` runs. So both builds are measured in every
round, one after the other, on perf bench sched pipe -T pinned to CPU 0, in the
configurations of `make bench` sections 1 and 2: the benchmark watched itself with
--source none (a) and with every breach kind and sampling on (b), and another, idle
process watched with the defaults (the machine-wide cost every switch pays). Prints each
configuration's new/old ratio: the median of the per-round ratios with its 95% bootstrap
interval. Needs root; an old build without an option used here fails the run.

--programs measures what the benchmark's ratio cannot resolve: each BPF program's own time
a run (kernel.bpf_stats_enabled), both builds attached in turn for --seconds beside the same
benchmark, watching it with every breach kind and watching another, idle process; prints
each program's median ns a run for old and new, and the median of the per-round
differences with its 95% bootstrap interval.

--old-env runs the old side with NAME=VALUE in its environment: one build against itself
with a test mode on one side. `--old-env HYBTRACE_TEST_ONE_TGID=1` makes the old side's
programs test their one target process by its tgid, as they did before the target set
(bpf/settings.bpf.h, test_one_tgid): what the target set's test costs, alone.

--cgroup (with --programs) watches by cgroup instead of by pid: the benchmark runs in a
cgroup two levels below the root (the one watched and a child of it), the idle process in
another such pair. `--old-env HYBTRACE_TEST_CGROUP_WALK=1 --cgroup` makes the old side's
programs walk up the task's cgroup to the watched one at every test instead of reading the
set's bit (test_cgroup_walk): the alternative to the bitmap, measured against it.
"""
import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402
import harness  # noqa: E402 (bench put the integration helpers on the path)


def configs(hybtrace, idle_pid, out):
    """(name, prefix, background) of each configuration measured with HYBTRACE (the
    command that runs it: a list)."""
    def run(opts):
        return hybtrace + ["run", "--quiet", "--output", out] + opts + ["--"]

    def watching():
        return bench.Background(hybtrace + ["--pid", str(idle_pid), "--quiet", "--json",
                                            "--output", out], r'"type":"attached"')
    return [
        ("self, --source none (a)", run(["--source", "none"]), None),
        ("self, all breaches + sampling (b)",
         run(["--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"]), None),
        ("others, defaults watching an idle process", (), watching),
    ]


PROGRAMS = ("handle_sched_switch", "handle_sched_waking", "handle_sched_wakeup",
            "handle_sys_enter", "handle_sys_exit")
PER_ROUND_TRIP = "all of them, a round trip"


def join(cgroup_dir):
    """For preexec_fn: the forked child moves itself into CGROUP_DIR before it execs."""
    def move():
        with open(os.path.join(cgroup_dir, "cgroup.procs"), "w") as f:
            f.write("0\n")
    return move


def program_costs(hybtrace, watched, opts, seconds, out, bench_cgroup=None):
    """{program: ns a run} of HYBTRACE's programs (the command that runs it: a list) while
    it watches WATCHED (target options; None: the benchmark by its pid) with OPTS, SECONDS
    of the benchmark after it is attached; the benchmark runs in BENCH_CGROUP (a
    directory) if given."""
    bench_p = subprocess.Popen(bench.pipe_cmd(10 ** 9), stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL,
                               preexec_fn=join(bench_cgroup) if bench_cgroup else None)
    helper = None
    try:
        targets = watched or ["--pid", str(bench_p.pid)]
        helper = bench.Background(hybtrace + targets + ["--quiet", "--json", "--max-dumps",
                                                        "0", "--output", out] + opts,
                                  r'"type":"attached"')
        time.sleep(seconds)
        bench_p.send_signal(signal.SIGSTOP)
        costs = bench.bpf_prog_costs()
        helper.stop()
        helper = None
    finally:
        if helper:
            helper.stop(check=False)
        bench_p.kill()
        bench_p.wait()
    out = {name: costs[name][0] for name in PROGRAMS if name in costs}
    # A round trip of the benchmark is two switches: what the programs spent on one.
    switches = costs.get("handle_sched_switch", (0, 0))[1]
    if switches:
        out[PER_ROUND_TRIP] = sum(ns * runs for name, (ns, runs) in costs.items()
                                  if name in PROGRAMS) / (switches / 2)
    return out


def compare_programs(args):
    groups = []
    if args.cgroup:
        # Each a cgroup watched and a child of it, where its process runs.
        groups = [harness.Cgroup(("service",), prefix="hybtrace-paired-self"),
                  harness.Cgroup(("service",), prefix="hybtrace-paired-others")]
    idle = subprocess.Popen(["sleep", "100000"],
                            preexec_fn=join(groups[1].dir("service")) if groups else None)
    all_kinds = ["--source", "none", "--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"]
    if groups:
        configs = (("self, all breaches", ["--cgroup", groups[0].path], all_kinds,
                    groups[0].dir("service")),
                   ("others, defaults watching an idle process", ["--cgroup", groups[1].path],
                    [], None))
    else:
        configs = (("self, all breaches", None, all_kinds, None),
                   ("others, defaults watching an idle process", ["--pid", str(idle.pid)], [],
                    None))
    costs = {}
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        with tempfile.TemporaryDirectory(prefix="hybtrace-paired-") as out:
            for i in range(args.runs):
                for name, watched, opts, cgroup_dir in configs:
                    pair = [("old", old_command(args)), ("new", new_command(args))]
                    for which, hybtrace in (pair if i % 2 == 0 else pair[::-1]):
                        for prog, ns in program_costs(hybtrace, watched, opts, args.seconds,
                                                      out, cgroup_dir).items():
                            costs.setdefault((name, prog, which), []).append(ns)
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        idle.kill()
        idle.wait()
        for g in groups:
            g.remove()
    bench.log("programs of new %s against old %s, ns a run, %d alternating rounds of %.0f s "
              "beside %s%s" % (args.new, " ".join(old_command(args)), args.runs, args.seconds,
                               " ".join(bench.pipe_cmd(10 ** 9)),
                               ", each watched by its cgroup" if groups else ""))
    # The benchmark's own round trip, untraced: what the programs' difference is a share of.
    trip_ns = statistics.median(bench.run_measured(bench.pipe_cmd(args.loops))
                                for _ in range(3)) * 1000
    for name, _, _, _ in configs:
        bench.log("  %s" % name)
        trip = None
        for prog in PROGRAMS + (PER_ROUND_TRIP,):
            old, new = costs.get((name, prog, "old")), costs.get((name, prog, "new"))
            if not old or not new or len(old) != len(new):
                continue
            point, lo, hi = bench.median_interval([n - o for n, o in zip(new, old)])
            bench.log("    %-26s old %6.0f  new %6.0f  new-old %+5.0f [%+.0f, %+.0f]"
                      % (prog, statistics.median(old), statistics.median(new), point, lo, hi))
            trip = (point, lo, hi) if prog == PER_ROUND_TRIP else None
        # All programs together, as a share of the untraced round trip.
        if trip:
            point, lo, hi = trip
            bench.log("    what that adds to an untraced round trip of %.0f ns: %+.2f%% "
                      "[%+.2f%%, %+.2f%%]" % (trip_ns, 100 * point / trip_ns, 100 * lo / trip_ns,
                                               100 * hi / trip_ns))


def old_command(args):
    """The old side's command: its build, with --old-env's settings."""
    return (["env"] + args.old_env if args.old_env else []) + [os.path.abspath(args.old)]


def new_command(args):
    return [os.path.abspath(args.new)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("old")
    ap.add_argument("new")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--loops", type=int, default=200000)
    ap.add_argument("--programs", action="store_true",
                    help="each BPF program's time a run instead of the benchmark's")
    ap.add_argument("--seconds", type=float, default=3.0,
                    help="with --programs: how long each build watches")
    ap.add_argument("--cgroup", action="store_true",
                    help="with --programs: watch by cgroup, not by pid")
    ap.add_argument("--old-env", action="append", default=[], metavar="NAME=VALUE",
                    help="in the old side's environment (repeatable)")
    args = ap.parse_args()
    if any("=" not in e for e in args.old_env):
        sys.exit("paired_builds: --old-env takes NAME=VALUE")
    if args.cgroup and not args.programs:
        sys.exit("paired_builds: --cgroup goes with --programs")
    for path in (args.old, args.new):
        if not os.access(path, os.X_OK):
            sys.exit("paired_builds: %s is not an executable" % path)
    if args.programs:
        compare_programs(args)
        return
    idle = subprocess.Popen(["sleep", "100000"])
    results = {}
    try:
        with tempfile.TemporaryDirectory(prefix="hybtrace-paired-") as out:
            old = configs(old_command(args), idle.pid, out)
            new = configs(new_command(args), idle.pid, out)
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
        args.new, " ".join(old_command(args)), args.runs, " ".join(bench.pipe_cmd(args.loops))))
    for name, _, _ in configs([], 0, ""):
        point, lo, hi = bench.paired_ratio(results[(name, "new")], results[(name, "old")])
        bench.log("  %-44s %.3fx [%.3f, %.3f]" % (name, point, lo, hi))


if __name__ == "__main__":
    main()
