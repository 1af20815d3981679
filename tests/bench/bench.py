#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""make bench: what hybtrace costs and how fast it reacts, next to the peers, in one run.

Virtual machines are noisy, so every configuration runs --runs times (15 by
default), interleaved with the others (A B C A B C ...). A round's runs are
seconds apart and share the machine's mood of the moment, so each ratio is
taken within a round (configuration over the untraced run of the same
round), and the benchmark prints their median with a 95% bootstrap interval;
a target counts as met only when the upper end is below it.

usage: bench.py [--smoke] [--runs N] [--only SECTION ...] [--baseline OLD_HYBTRACE]
"""
import argparse
import glob
import json
import os
import random
import re
import resource
import select
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The integration tests' helpers for cgroups and for hybtrace's options.
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
import harness  # noqa: E402
import services  # noqa: E402
HYBTRACE = os.path.join(ROOT, "build", "hybtrace")
EMPTY_PROGS = os.path.join(ROOT, "build", "bench", "empty_progs")
BENCH_DECODE = os.path.join(ROOT, "build", "bench", "bench_decode")
WORKLOADS = os.path.join(ROOT, "build", "workloads")

RUNQLAT_BT = r"""
tracepoint:sched:sched_wakeup, tracepoint:sched:sched_wakeup_new { @qtime[args->pid] = nsecs; }
tracepoint:sched:sched_switch {
  if (args->prev_state == 0) { @qtime[args->prev_pid] = nsecs; }
  $ns = @qtime[args->next_pid];
  if ($ns) { @usecs = hist((nsecs - $ns) / 1000); }
  delete(@qtime[args->next_pid]);
}
"""


def log(msg):
    print(msg, flush=True)


class BenchFailure(Exception):
    """A measurement that could not be taken: the section fails, and so does the run."""


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return "%s, %d CPUs, Linux %s" % (model, os.cpu_count(), os.uname().release)


# ---- statistics ----

def paired_ratio(values, base, rounds=2000, seed=1):
    """Median of values[i]/base[i] (the same interleaved round) with a 95% bootstrap interval.

    Slow and fast spells of a virtual machine last longer than a round, so a
    ratio within a round cancels most of them; unpaired medians keep them.
    """
    return median_interval([v / b for v, b in zip(values, base)], rounds, seed)


def median_interval(samples, rounds=2000, seed=1):
    """The median of SAMPLES (one per round) with its 95% bootstrap interval."""
    rng = random.Random(seed)
    medians = sorted(statistics.median([rng.choice(samples) for _ in samples])
                     for _ in range(rounds))
    return (statistics.median(samples), medians[int(0.025 * rounds)],
            medians[int(0.975 * rounds) - 1])


def verdict(hi, target, unit="x"):
    if target is None:
        return ""
    return "target <= %g%s: %s" % (target, unit, "met" if hi < target else "NOT met")


def print_ratios(title, results, base_name, targets):
    log("\n%s (median of per-round ratios, 95%% interval, %d rounds)" % (
        title, len(results[base_name])))
    base = results[base_name]
    log("  %-44s %10.3f  (1.000x)" % (base_name, statistics.median(base)))
    for name, values in results.items():
        if name == base_name:
            continue
        point, lo, hi = paired_ratio(values, base)
        log("  %-44s %10.3f  %.3fx [%.3f, %.3f]  %s" % (name, statistics.median(values), point, lo,
                                                       hi, verdict(hi, targets.get(name))))


def print_over(label, values, base):
    """One configuration over another measured in the same rounds (a peer, or the floor)."""
    point, lo, hi = paired_ratio(values, base)
    log("  %-44s %10s  %.3fx [%.3f, %.3f]" % (label, "", point, lo, hi))
    return point, lo, hi


# ---- running things ----

def ensure_tracefs():
    if not os.path.ismount("/sys/kernel/tracing"):
        subprocess.run(["mount", "-t", "tracefs", "nodev", "/sys/kernel/tracing"], check=False)


def pipe_cmd(loops):
    return ["taskset", "-c", "0", "perf", "bench", "sched", "pipe", "-T", "-l", str(loops)]


def messaging_cmd(loops):
    return ["perf", "bench", "sched", "messaging", "-t", "-g", "4", "-l", str(loops)]


def parse_bench(out):
    """usecs/op for pipe; total seconds for messaging."""
    m = re.search(r"([\d.]+)\s+usecs/op", out)
    if m:
        return float(m.group(1))
    m = re.search(r"Total time:\s+([\d.]+)\s+\[sec\]", out)
    if m:
        return float(m.group(1))
    raise RuntimeError("cannot read the benchmark's result:\n" + out[-2000:])


class Output:
    """Lines a child writes, read as they come (so a full pipe never stalls it), kept for
    waiting on a line that says it is ready and for the error message when it is not."""

    def __init__(self, stream):
        self.lines = []
        self.cond = threading.Condition()
        self.done = False
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            with self.cond:
                self.lines.append(line)
                self.cond.notify_all()
        with self.cond:
            self.done = True
            self.cond.notify_all()

    def wait_for(self, pattern, timeout_s, what, start=0, context=None):
        """Index of the first line from START on that matches PATTERN; BenchFailure when the
        output ends first or TIMEOUT_S passes, with what CONTEXT() says about the child."""
        deadline = time.monotonic() + timeout_s
        i = start
        with self.cond:
            while True:
                while i < len(self.lines):
                    if re.search(pattern, self.lines[i]):
                        return i
                    i += 1
                left = deadline - time.monotonic()
                if self.done or left <= 0:
                    raise BenchFailure("%s: %s; its output ends with: %s%s" % (
                        what, "it exited" if self.done else "timed out after %d s" % timeout_s,
                        "".join(self.lines[-20:])[-2000:], context() if context else ""))
                self.cond.wait(left)

    def count(self, pattern):
        """Lines so far that hold PATTERN, while the child still writes."""
        with self.cond:
            return sum(pattern in line for line in self.lines)

    def text(self):
        self.thread.join(timeout=30)
        with self.cond:
            return "".join(self.lines)


ATTACH_TIMEOUT_S = 60


class Background:
    """A helper process started before the measured command and stopped after it.

    READY is the line it prints once it is attached: the measurement starts then, never
    after a fixed sleep. A peer that failed to start would make its configuration look free,
    so a helper that exits or stays silent fails the section."""

    def __init__(self, cmd, ready, env=None):
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, errors="replace", env=env)
        self.out = Output(self.p.stdout)
        try:
            self.out.wait_for(ready, ATTACH_TIMEOUT_S, "%s did not say it was attached" % cmd[0])
        except BenchFailure:
            self.stop(check=False)
            raise

    def stop(self, check=True):
        """Stop it; with CHECK, one that ended before it was told measured nothing."""
        gone = self.p.poll() is not None
        if not gone:
            self.p.send_signal(signal.SIGINT)
        try:
            self.p.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.p.kill()
            self.p.wait()
        text = self.out.text()
        if check and gone:
            raise BenchFailure("%s exited (%d) during the measurement: %s" % (
                self.p.args[0], self.p.returncode, text[-2000:]))
        return text


def empty_progs():
    return Background([EMPTY_PROGS], "^attached")


def bpftrace_runqlat():
    # bpftrace (0.14 and later) says so once every probe is attached; its BEGIN probe runs
    # before the others are.
    env = dict(os.environ, __BPFTRACE_NOTIFY_PROBES_ATTACHED="1")
    return Background(["bpftrace", "-e", RUNQLAT_BT], "__BPFTRACE_NOTIFY_PROBES_ATTACHED", env)


def hybtrace_watching(pid, out, opts):
    """hybtrace --pid PID, once its attached JSON line says monitoring has begun."""
    return Background([HYBTRACE, "--pid", str(pid), "--quiet", "--json", "--output", out] + opts,
                      r'"type":"attached"')


class PerfRecordAttached:
    """perf record -F 999 -g -p PID: perf's per-thread sampling of another process. It
    starts with its events disabled and enables them through its control FIFO, whose
    acknowledgement says they are on."""

    def __init__(self, pid, out):
        self.dir = tempfile.mkdtemp(prefix="hybtrace-bench-perf-")
        ctl, ack = os.path.join(self.dir, "ctl"), os.path.join(self.dir, "ack")
        os.mkfifo(ctl)
        os.mkfifo(ack)
        self.bg = None
        try:
            self.bg = Background(["perf", "record", "-F", "999", "-g", "-D", "-1", "--control",
                                  "fifo:%s,%s" % (ctl, ack), "-p", str(pid), "-o",
                                  os.path.join(out, "perf-other.data")], "Events disabled")
            # perf holds both FIFOs open read-write, so these opens do not block.
            ack_fd = os.open(ack, os.O_RDONLY | os.O_NONBLOCK)
            try:
                with open(ctl, "w") as f:
                    f.write("enable\n")
                if not select.select([ack_fd], [], [], ATTACH_TIMEOUT_S)[0] or \
                        not os.read(ack_fd, 16).startswith(b"ack"):
                    raise BenchFailure("perf record did not acknowledge enabling its events")
            finally:
                os.close(ack_fd)
        except BaseException:
            self.stop(check=False)
            raise

    def stop(self, check=True):
        try:
            return self.bg.stop(check) if self.bg else ""
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_measured(cmd, prefix=(), background=None, preexec_fn=None):
    bg = background() if background else None
    try:
        p = subprocess.run(list(prefix) + cmd, capture_output=True, text=True, timeout=600,
                           preexec_fn=preexec_fn)
    finally:
        if bg:
            bg.stop()
    return parse_bench(p.stdout + p.stderr)


def hybtrace_run(opts, outdir):
    return [HYBTRACE, "run", "--quiet", "--output", outdir] + opts + ["--"]


def interleave(configs, runs, cmd, preexec_fn=None):
    results = {name: [] for name, _, _ in configs}
    for i in range(runs):
        for name, prefix, background in configs:
            results[name].append(run_measured(cmd, prefix, background, preexec_fn))
    return results


# ---- sections ----

def section_overhead_self(args, out):
    """Every event is the target's: perf bench sched pipe -T pinned to one CPU, watched itself."""
    loops = 20000 if args.smoke else 200000
    configs = [
        ("untraced", (), None),
        ("empty BPF on sched_switch+wakeup (floor)", (), empty_progs),
        ("hybtrace --source none (a)", hybtrace_run(["--source", "none"], out), None),
        ("hybtrace all breaches + sampling (b)", hybtrace_run(
            ["--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"], out), None),
        ("hybtrace defaults (sampling at its default rate)", hybtrace_run([], out), None),
        ("bpftrace runqlat logic", (), bpftrace_runqlat),
        ("perf sched record -a", ["perf", "sched", "record", "-a", "-o",
                                  os.path.join(out, "perf.data"), "--"], None),
        # Per-thread sampling, perf's way: every switch of the target switches perf contexts.
        ("perf record -F 999 -g (per-thread sampling)", [
            "perf", "record", "-F", "999", "-g", "-o", os.path.join(out, "perf-self.data"),
            "--"], None),
    ]
    results = interleave(configs, args.runs, pipe_cmd(loops))
    print_ratios("1. overhead on the target itself: perf bench sched pipe -T, usecs/op", results,
                 "untraced", {"hybtrace --source none (a)": 1.10,
                              "hybtrace all breaches + sampling (b)": 1.53})
    # (b)'s target is bpftrace itself: compared with bpftrace as measured in this run.
    point, lo, hi = paired_ratio(results["hybtrace all breaches + sampling (b)"],
                                 results["bpftrace runqlat logic"])
    log("  %-44s %10s  %.3fx [%.3f, %.3f]  %s" % ("(b) over bpftrace, same run", "", point, lo,
                                                  hi, verdict(hi, 1.0)))
    # What (a) adds to what merely running BPF on these tracepoints costs.
    print_over("(a) over the empty programs, same run", results["hybtrace --source none (a)"],
               results["empty BPF on sched_switch+wakeup (floor)"])
    # What hybtrace's CPU-wide sampling adds, to set beside perf record's per-thread sampling.
    print_over("sampling: defaults over (a), same run",
               results["hybtrace defaults (sampling at its default rate)"],
               results["hybtrace --source none (a)"])
    return results


def section_overhead_others(args, out):
    """hybtrace watching an idle process; the benchmark is someone else."""
    loops = 20000 if args.smoke else 200000
    idle = subprocess.Popen(["sleep", "100000"])

    def watch(opts):
        return lambda: hybtrace_watching(idle.pid, out, opts)
    configs = [
        ("untraced", (), None),
        ("empty BPF on sched_switch+wakeup (floor)", (), empty_progs),
        ("hybtrace defaults, watching another process", (), watch([])),
        ("hybtrace --source none, watching another", (), watch(["--source", "none"])),
        ("hybtrace --syscall 1ms, watching another process", (), watch(["--syscall", "1ms"])),
        # Per-thread events on another process turn on perf's context-switch hooks for
        # every task: what per-thread sampling would cost those that are not the target.
        ("perf record -F 999 -g -p (another process)", (), lambda: PerfRecordAttached(
            idle.pid, out)),
    ]
    try:
        results = interleave(configs, args.runs, pipe_cmd(loops))
    finally:
        idle.kill()
        idle.wait()
    print_ratios("2. overhead on others: perf bench sched pipe -T, usecs/op", results, "untraced",
                 {"hybtrace defaults, watching another process": 1.03})
    print_over("defaults over the empty programs, same run",
               results["hybtrace defaults, watching another process"],
               results["empty BPF on sched_switch+wakeup (floor)"])
    print_over("sampling: defaults over --source none",
               results["hybtrace defaults, watching another process"],
               results["hybtrace --source none, watching another"])
    print_over("syscalls: --syscall 1ms over defaults",
               results["hybtrace --syscall 1ms, watching another process"],
               results["hybtrace defaults, watching another process"])
    return results


def section_messaging(args, out):
    loops = 50 if args.smoke else 500
    configs = [
        ("untraced", (), None),
        ("hybtrace --source none", hybtrace_run(["--source", "none"], out), None),
        ("hybtrace all breaches + sampling", hybtrace_run(
            ["--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"], out), None),
        ("bpftrace runqlat logic", (), bpftrace_runqlat),
        ("perf sched record -a", ["perf", "sched", "record", "-a", "-o",
                                  os.path.join(out, "perf.data"), "--"], None),
    ]
    results = interleave(configs, args.runs, messaging_cmd(loops))
    print_ratios("3. perf bench sched messaging -t -g 4, seconds", results, "untraced", {})
    return results


def bpf_prog_costs():
    p = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True)
    if p.returncode != 0:
        raise BenchFailure("bpftool prog show failed (exit %d): %s" % (p.returncode,
                                                                      p.stderr.strip()))
    try:
        progs = json.loads(p.stdout)
    except ValueError as e:
        raise BenchFailure("bpftool prog show printed what is not JSON: %s" % e)
    costs = {}
    for prog in progs:
        name, runs = prog.get("name", ""), prog.get("run_cnt", 0)
        if runs:
            costs[name] = (prog.get("run_time_ns", 0) / runs, runs)
    return costs


def section_bpf_cost(args, out):
    """Per-event cost of each program (kernel.bpf_stats_enabled), net of an empty program.

    The statistics drift by tens of ns from one attach to the next, so the
    empty programs, hybtrace with every breach kind on and hybtrace at its
    defaults are attached in turn, several rounds, and each cost is the
    median over the rounds.
    """
    seconds = 1.0 if args.smoke else 3.0
    rounds = 1 if args.smoke else 5

    def measure(attach):
        """The programs' statistics, and what the helper printed once stopped."""
        bench = subprocess.Popen(pipe_cmd(10 ** 9), stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        helper = None
        try:
            helper = attach(bench.pid)
            time.sleep(seconds)
            # Stopped, the benchmark takes no more stacks: hybtrace's count of them, read
            # at its exit, covers the same runs as the statistics read now.
            bench.send_signal(signal.SIGSTOP)
            costs = bpf_prog_costs()
            text, helper = helper.stop(), None
            return costs, text
        finally:
            try:
                if helper:
                    helper.stop()
            finally:
                bench.kill()
                bench.wait()

    def stacks_taken(text):
        for line in text.splitlines():
            if line.startswith('{"type":"summary"'):
                return json.loads(line).get("block_stacks", {}).get("taken", 0)
        return 0

    def watch(opts):
        return lambda pid: hybtrace_watching(pid, out, opts)

    every_kind = ["--rq-delay", "1ms", "--off-cpu", "1ms", "--syscall", "1ms"]
    # Watching another, idle process: what every task on the machine pays, its wakeups
    # recorded through the path of tasks that are no target.
    idle = subprocess.Popen(["sleep", "100000"])
    # --block-stacks takes a stack at every voluntary switch-out of the target: in a pipe
    # ping-pong, every switch. No on-CPU source: its cost is not the programs'.
    configs = (("empty", lambda pid: empty_progs()),
               ("all", watch(every_kind)),
               ("defaults", watch([])),
               ("others", lambda pid: hybtrace_watching(idle.pid, out, ["--source", "none"])),
               ("block_fp", watch(every_kind + ["--block-stacks", "--source", "none"])),
               ("block_dwarf", watch(every_kind + ["--block-stacks", "--source", "none",
                                                   "--callgraph", "dwarf"])))
    samples = {name: {} for name, _ in configs}
    taken = {name: [] for name, _ in configs}
    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for _ in range(rounds):
            for name, attach in configs:
                costs, text = measure(attach)
                for prog, (ns, runs) in costs.items():
                    samples[name].setdefault(prog, []).append((ns, runs))
                taken[name].append(stacks_taken(text))
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])
        idle.kill()
        idle.wait()

    # A program that did not run measured nothing: its cost would read as free.
    required = {"empty": ["empty_sched_switch"],
                "all": ["handle_sched_switch", "handle_sched_waking", "handle_sched_wakeup",
                        "handle_sys_enter", "handle_sys_exit"],
                "defaults": ["handle_sched_switch"],
                "others": ["handle_sched_switch", "handle_sched_waking", "handle_sched_wakeup"],
                "block_fp": ["handle_sched_switch"],
                "block_dwarf": ["handle_sched_switch"]}
    missing = ["%s in %s" % (prog, name) for name, progs in required.items() for prog in progs
               if len(samples[name].get(prog, [])) < rounds]
    missing += ["the stacks taken in %s" % name for name in ("block_fp", "block_dwarf")
                if not all(taken[name])]
    if missing:
        raise BenchFailure("programs missing from the statistics: %s" % ", ".join(missing))

    def cost(name, prog):
        runs = samples[name][prog]
        return statistics.median(ns for ns, _ in runs), sum(r for _, r in runs)

    base = cost("empty", "empty_sched_switch")[0]
    log("\n4. per-event BPF cost while watching perf bench sched pipe -T, net of an empty "
        "program (empty: %.0f ns a run with statistics on); medians of %d rounds" % (base, rounds))
    log("  with --rq-delay, --off-cpu and --syscall on:")
    for prog in sorted(samples["all"]):
        if not prog.startswith("handle_"):
            continue
        ns, runs = cost("all", prog)
        log("  %-28s %9d runs  %6.0f ns  net %6.0f ns" % (prog, runs, ns, ns - base))
    ns, runs = cost("defaults", "handle_sched_switch")
    log("  at the defaults (run-queue breaches only):")
    log("  %-28s %9d runs  %6.0f ns  net %6.0f ns  target <= 100 ns: %s" % (
        "handle_sched_switch", runs, ns, ns - base, "met" if ns - base <= 100 else "NOT met"))
    ns_all = cost("all", "handle_sched_switch")[0]
    log("  %-28s %26s  net %6.0f ns  (every breach kind on): %s" % (
        "handle_sched_switch", "", ns_all - base, "met" if ns_all - base <= 100 else "NOT met"))
    log("  watching another, idle process (--source none): every task's switches and "
        "wakeups are recorded:")
    for prog in ("handle_sched_switch", "handle_sched_waking", "handle_sched_wakeup"):
        ns, runs = cost("others", prog)
        log("  %-28s %9d runs  %6.0f ns  net %6.0f ns" % (prog, runs, ns, ns - base))
    log("  with --block-stacks too (a stack at each of the target's voluntary switch-outs, "
        "some of these runs):")
    for name, what in (("block_fp", "fp"), ("block_dwarf", "--callgraph dwarf")):
        ns, runs = cost(name, "handle_sched_switch")
        log("  %-28s %9d runs  %6.0f ns  net %6.0f ns  +%.0f ns over the same without (%s)" % (
            "handle_sched_switch", runs, ns, ns - base, ns - ns_all, what))

    def per_stack(name):
        """Within each round: the time the program ran beyond what the same runs cost
        without --block-stacks in that round, over the stacks hybtrace says it took."""
        block, without = samples[name]["handle_sched_switch"], samples["all"]["handle_sched_switch"]
        return [(ns - ns_without) * runs / stacks
                for (ns, runs), (ns_without, _), stacks in zip(block, without, taken[name])]

    fp, dwarf = per_stack("block_fp"), per_stack("block_dwarf")
    log("  ns per block stack (fp / dwarf): %.0f / %.0f ns (the program's added time over the "
        "stacks taken, %d / %d of them, %.0f%% / %.0f%% of its runs; medians of %d rounds)" % (
            statistics.median(fp), statistics.median(dwarf), sum(taken["block_fp"]),
            sum(taken["block_dwarf"]),
            100.0 * sum(taken["block_fp"]) / cost("block_fp", "handle_sched_switch")[1],
            100.0 * sum(taken["block_dwarf"]) / cost("block_dwarf", "handle_sched_switch")[1],
            rounds))


def sched_waking_totals():
    """handle_sched_waking's (run_time_ns, run_cnt) so far: its statistics are cumulative.
    bpftool walks every program by id and gives up when one goes away under it (a program
    another process loads and unloads as it starts): a few tries."""
    for _ in range(10):
        p = subprocess.run(["bpftool", "-j", "prog", "show", "name", "handle_sched_waking"],
                           capture_output=True, text=True)
        try:
            progs = json.loads(p.stdout) if p.returncode == 0 else None
        except ValueError:
            progs = None
        if isinstance(progs, dict):
            progs = [progs]
        if progs:
            return progs[0].get("run_time_ns", 0), progs[0].get("run_cnt", 0)
        time.sleep(0.1)
    raise BenchFailure("bpftool found no handle_sched_waking (rc %d): %s"
                       % (p.returncode, p.stderr.strip()))


def section_softirq_cost(args, out):
    """What naming a softirq's task costs sched_waking, per wakeup of the target.

    A loopback TCP ping-pong, a reply each 1 ms (build/workloads/tcp_pingpong): the
    receiver is woken by the net_rx softirq that the sender's send runs, and hybtrace
    names the sender for it. hybtrace watches the receiver (every round's wakeup is the
    target's, from softirq), or a sleeping process (every run is another task's
    wakeup, the cost of the target check alone). The ping-pong runs between two
    snapshots of the program's statistics, so each configuration's run time covers
    its rounds exactly; the receiver's wakeups are its rounds (its log's wait_end).
    Per wakeup: (run time - other runs x their mean) / rounds."""
    seconds = 1.0 if args.smoke else 4.0
    rounds = 1 if args.smoke else 5
    results = {"target": [], "other": []}

    def one(config):
        with tempfile.TemporaryDirectory() as d:
            start, stop = os.path.join(d, "start"), os.path.join(d, "stop")
            log_path = os.path.join(d, "log")
            env = dict(os.environ, HT_START_FILE=start, HT_STOP_FILE=stop,
                       HT_WORKLOAD_LOG=log_path)
            wl = subprocess.Popen([os.path.join(WORKLOADS, "tcp_pingpong"), "0", "1"], env=env,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bystander = subprocess.Popen(["sleep", "600"])
            helper = None
            try:
                # The bystander keeps hybtrace attached once the ping-pong has exited, for
                # the statistics read after it (hybtrace ends with its last target).
                helper = hybtrace_watching("%d,%d" % (wl.pid, bystander.pid)
                                           if config == "target" else bystander.pid, out, [])
                before = sched_waking_totals()
                open(start, "w").close()
                time.sleep(seconds)
                open(stop, "w").close()
                wait_exit(wl, 30)
                after = sched_waking_totals()
            finally:
                if helper:
                    helper.stop(check=False)
                for p in (wl, bystander):
                    if p.poll() is None:
                        p.kill()
                        p.wait()
            with open(log_path) as f:
                waits = sum('"event":"wait_end"' in line for line in f)
        if wl.returncode != 0 or waits < 10:
            raise BenchFailure("tcp_pingpong exited %d after %d rounds" % (wl.returncode, waits))
        return after[0] - before[0], after[1] - before[1], waits

    subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=1"], check=True)
    try:
        for _ in range(rounds):
            for config in results:
                results[config].append(one(config))
    finally:
        subprocess.run(["sysctl", "-q", "kernel.bpf_stats_enabled=0"])

    other_ns = statistics.median(ns / runs for ns, runs, _ in results["other"] if runs)
    per_wakeup = [(ns - (runs - waits) * other_ns) / waits for ns, runs, waits in results["target"]]
    log("\n9. sched_waking per wakeup of a target from a softirq run in another task "
        "(loopback TCP ping-pong, a reply each 1 ms); medians of %d rounds" % rounds)
    log("  %-44s %6.0f ns a run (another task's wakeup)" % ("target check alone", other_ns))
    log("  %-44s %6.0f ns a wakeup  (%d wakeups a round, %d runs)" % (
        "the target's softirq wakeup, named", statistics.median(per_wakeup),
        statistics.median(w for _, _, w in results["target"]),
        statistics.median(r for _, r, _ in results["target"])))


def hogs(n):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(n)]


def dump_latencies(opts, load, smoke):
    """Breach end to on-CPU sources frozen, from each dump's metadata (post window 0).

    Under load the builder (nice 19) gets about 1.5% of a CPU next to the hogs, so a
    dump takes a few hundred ms to write and breaches meanwhile are not dumped: the
    breaches are spread out (--min-interval) and the run is longer, so that enough
    dumps are taken to read a p99. The first breach of each interval is dumped
    (--dump-policy first): the worst would pick the sleeps a loaded CPU lengthened,
    whose freezes the same load delays."""
    rounds = 20 * (20 if load else 1) if smoke else 200 * (80 if load else 1)
    interval = "400ms" if load else "0ms"
    with tempfile.TemporaryDirectory() as out:
        hog = hogs(os.cpu_count()) if load else []
        try:
            run = subprocess.run([HYBTRACE, "run", "--quiet", "--json", "--rq-delay", "off",
                                  "--syscall", "1ms", "--syscalls", "clock_nanosleep", "--post",
                                  "0ms", "--pre", "2ms", "--min-interval", interval,
                                  "--dump-policy", "first", "--max-dumps", "100000",
                                  "--output", out] + opts +
                                 ["--", os.path.join(WORKLOADS, "sleeper"), "3", str(rounds)],
                                 capture_output=True, text=True, timeout=600)
        finally:
            for h in hog:
                h.kill()
                h.wait()
        if run.returncode != 0:
            raise BenchFailure("hybtrace run exited with %d: %s" % (run.returncode,
                                                                   run.stderr[-2000:]))
        lat = []
        for f in glob.glob(os.path.join(out, "*.perfetto-trace")):
            p = subprocess.run([HYBTRACE, "report", "--json", f], capture_output=True, text=True)
            if p.returncode != 0:
                raise BenchFailure("hybtrace report %s exited with %d: %s" % (
                    f, p.returncode, p.stderr.strip()))
            meta = json.loads(p.stdout)["metadata"]
            # A dump that waited for another froze late by design: not a latency.
            if "freeze_late_ns" in meta and meta.get("dump_deferred") != "1":
                lat.append(int(meta["freeze_late_ns"]) / 1000.0)
        if not lat:
            raise BenchFailure("no dump to measure (%s): %s" % (
                " ".join(opts) or "defaults", run.stderr[-2000:]))
        return sorted(lat)


def pct(values, q):
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def section_trigger_latency(args, out):
    log("\n5. trigger latency: breach end (BPF timestamp) to sampling rings frozen, us")
    for load in (False, True):
        for opts, label in (([], "default priority"), (["--rt-priority", "50"], "--rt-priority 50")):
            lat = dump_latencies(opts, load, args.smoke)
            target = verdict(pct(lat, 0.99), 100, " us (p99)") if load else ""
            log("  %-12s %-18s %4d dumps  median %8.1f  p99 %8.1f  %s" % (
                "under load" if load else "idle", label, len(lat), pct(lat, 0.5), pct(lat, 0.99),
                target))


def wait_until(predicate, timeout_s, what):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchFailure("timed out waiting for " + what)
        time.sleep(0.02)


def threads_of(pid):
    try:
        return len(os.listdir("/proc/%d/task" % pid))
    except OSError:
        return 0


def comm_of(pid):
    try:
        with open("/proc/%d/comm" % pid) as f:
            return f.read().strip()
    except OSError:
        return ""


def cpu_seconds_of(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_exit(p, timeout_s):
    """Reap P, returning the CPU seconds it used in all (its rusage)."""
    deadline = time.monotonic() + timeout_s
    while True:
        pid, status, usage = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return usage.ru_utime + usage.ru_stime
        if time.monotonic() > deadline:
            p.kill()
            p.wait()
            raise BenchFailure("%s did not exit within %d s" % (p.args[0], timeout_s))
        time.sleep(0.02)


def said_by(h, err, target=None):
    """What a wait_for failure adds: whether hybtrace H and its TARGET (a Popen, where the
    bench started it) had ended, and how, and the end of hybtrace's stderr ERR."""
    def context():
        time.sleep(0.5)
        parts = ["hybtrace %s" % ("runs" if h.poll() is None else "exited with %d" % h.returncode)]
        if isinstance(target, subprocess.Popen):
            rc = target.poll()
            parts.append("%s %s" % (os.path.basename(target.args[0]),
                                    "runs" if rc is None else "exited with %d" % rc))
        lines = err.lines[-12:]
        parts.append("its stderr ends with: %s" % ("".join(lines)[-1500:] if lines else "(nothing)"))
        return "; " + "; ".join(parts)
    return context


def manual_dumps(args):
    """A 20 ms window of 4 busy threads: trigger to file on disk, size; CPU and RSS over a run.

    The busy threads run until told to stop, hybtrace is watched from its attached line,
    and each SIGUSR2 waits for its dump's JSON line before the next."""
    seconds = 3 if args.smoke else 60
    with tempfile.TemporaryDirectory() as d:
        stop_file = os.path.join(d, "stop")
        wl = subprocess.Popen([os.path.join(WORKLOADS, "busy_threads"), "4"],
                              env=dict(os.environ, HT_STOP_FILE=stop_file))
        h = None
        try:
            wait_until(lambda: threads_of(wl.pid) >= 5 or wl.poll() is not None, 30,
                       "busy_threads to start its threads")
            h = subprocess.Popen([HYBTRACE, "--pid", str(wl.pid), "--quiet", "--json",
                                  "--output", d, "--pre", "20ms", "--post", "0ms"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = Output(h.stdout), Output(h.stderr)
            at = out.wait_for(r'"type":"attached"', ATTACH_TIMEOUT_S,
                              "hybtrace did not say it was attached")
            attached_s = time.monotonic()
            for _ in range(3 if args.smoke else 10):
                h.send_signal(signal.SIGUSR2)
                at = out.wait_for(r'"type":"dump"', 60, "hybtrace wrote no dump for SIGUSR2",
                                  at + 1, said_by(h, err, wl))
            time.sleep(max(0.0, seconds - (time.monotonic() - attached_s)))
            cpu_s = cpu_seconds_of(h.pid)
            # Its CPU goes by the breach: the busy threads' run-queue waits pass --rq-delay.
            breaches = out.count('"type":"breach"')
            with open("/proc/%d/status" % h.pid) as f:
                hwm = [l for l in f if l.startswith("VmHWM")][0].split()[1]
            h.send_signal(signal.SIGINT)
            h.wait(timeout=60)
        finally:
            open(stop_file, "w").close()
            if h and h.poll() is None:
                h.kill()
                h.wait()
            wl.wait(timeout=30)
        if h.returncode != 0:
            raise BenchFailure("hybtrace exited with %d: %s" % (h.returncode, err.text()[-2000:]))
        writes = []
        for line in out.text().splitlines():
            if '"type":"dump"' in line:
                o = json.loads(line)
                writes.append((o["write_ns"] / 1e6, o["cpu_ns"] / 1e6, o["bytes"]))
    log("  build + write: median %.2f ms of CPU; %.2f ms to the file on disk (median; the "
        "worker runs at nice 19 behind the busy threads); file size median %d bytes" % (
            statistics.median(c for _, c, _ in writes),
            statistics.median(w for w, _, _ in writes),
            statistics.median(b for _, _, b in writes)))
    log("  hybtrace over %d s: %.2f s of CPU (%.1f%% of one core), peak RSS %s kB; %d breaches "
        "(%.0f a second), %.0f us of CPU a breach" % (
            seconds, cpu_s, 100.0 * cpu_s / seconds, hwm, breaches, breaches / seconds,
            1e6 * cpu_s / max(1, breaches)))


def breach_storm(args):
    """One thread breaching as fast as it sleeps: hybtrace's CPU from the storm's start to
    its end, at the default dump limits."""
    seconds = 2 if args.smoke else 10
    with tempfile.TemporaryDirectory() as d:
        start_file, log_path = os.path.join(d, "start"), os.path.join(d, "log")
        dumps = os.path.join(d, "dumps")
        os.mkdir(dumps)
        wl = subprocess.Popen([os.path.join(WORKLOADS, "breach_storm"), str(seconds), "800"],
                              env=dict(os.environ, HT_START_FILE=start_file,
                                       HT_WORKLOAD_LOG=log_path))
        h = None
        try:
            # It names itself before it waits for the start file.
            wait_until(lambda: comm_of(wl.pid) == "storm" or wl.poll() is not None, 30,
                       "breach_storm to start")
            h = subprocess.Popen([HYBTRACE, "--pid", str(wl.pid), "--quiet", "--json",
                                  "--syscall", "500us", "--output", dumps],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            out, err = Output(h.stdout), Output(h.stderr)
            out.wait_for(r'"type":"attached"', ATTACH_TIMEOUT_S,
                         "hybtrace did not say it was attached")
            before_s = cpu_seconds_of(h.pid)
            open(start_file, "w").close()
            wl.wait(timeout=seconds + 60)
            # hybtrace ends with its target; its summary is part of the storm's cost.
            total_s = wait_exit(h, 60)
        finally:
            open(start_file, "w").close()
            if h and h.poll() is None:
                h.kill()
                h.wait()
            if wl.poll() is None:
                wl.kill()
                wl.wait()
        if h.returncode != 0:
            raise BenchFailure("hybtrace exited with %d: %s" % (h.returncode, err.text()[-2000:]))
        events = {}
        with open(log_path) as f:
            for line in f:
                o = json.loads(line)
                events[o["event"]] = o
        lines = [json.loads(l) for l in out.text().splitlines() if l.startswith("{")]
        breaches = sum(1 for o in lines if o.get("type") == "breach")
        summary = [o for o in lines if o.get("type") == "summary"]
        if "storm_end" not in events or not breaches or not summary:
            raise BenchFailure("the storm measured nothing: %d breaches, log %r" % (
                breaches, sorted(events)))
        storm_s = (events["storm_end"]["ts_ns"] - events["storm_start"]["ts_ns"]) / 1e9
        cpu_s = total_s - before_s
    log("  breach storm (one thread sleeping 800 us, --syscall 500us, default dump limits): "
        "%.0f breaches a second for %.1f s, %d dumps; hybtrace %.2f s of CPU, %.1f%% of one "
        "core" % (breaches / storm_s, storm_s, summary[0]["dumps"]["written"], cpu_s,
                  100.0 * cpu_s / storm_s))


def window_dumps(binary, scenario, smoke):
    """The dumps BINARY writes of SCENARIO: [(bytes, CPU ms to build and write)].

    "demo": the demo's run-queue breaches (`make demo`'s options, 3 dumps). "pipe":
    `perf bench sched pipe -T`, two threads waking each other tens of thousands of times
    a second, with a manual dump of its last 20 ms every half second: the windows
    richest in wakeups."""
    with tempfile.TemporaryDirectory() as d:
        if scenario == "demo":
            cmd = [binary, "run", "--json", "--quiet", "--rq-delay", "1ms", "--max-dumps", "3",
                   "--no-children", "--output", d, "--", os.path.join(WORKLOADS, "demo_service"),
                   "2"]
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            lines = p.stdout.splitlines()
            if p.returncode:
                raise BenchFailure("the demo under %s exited with %d: %s" % (
                    binary, p.returncode, p.stderr[-1000:]))
        else:
            # pipe -T runs until hybtrace, told SIGTERM, passes it on: a loop count that
            # ended it between a SIGUSR2 and its dump would leave that dump unwritten.
            h = subprocess.Popen([binary, "run", "--json", "--quiet", "--rq-delay", "off",
                                  "--pre", "20ms", "--post", "0ms", "--output", d, "--",
                                  "perf", "bench", "sched", "pipe", "-T", "-l", "1000000000"],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            o, err = Output(h.stdout), Output(h.stderr)
            try:
                at = o.wait_for(r'"type":"attached"', ATTACH_TIMEOUT_S,
                                "hybtrace did not say it was attached", 0, said_by(h, err))
                for _ in range(3 if smoke else 8):
                    time.sleep(0.5)
                    h.send_signal(signal.SIGUSR2)
                    at = o.wait_for(r'"type":"dump"', 60, "hybtrace wrote no dump for SIGUSR2",
                                    at + 1, said_by(h, err))
                h.send_signal(signal.SIGTERM)
                h.wait(timeout=60)
            finally:
                if h.poll() is None:
                    h.kill()
                    h.wait()
            lines = o.text().splitlines()
        dumps = [json.loads(l) for l in lines if '"type":"dump"' in l]
    if not dumps:
        raise BenchFailure("no dump of the %s under %s" % (scenario, binary))
    return [(x["bytes"], x["cpu_ns"] / 1e6) for x in dumps]


def dump_windows(args):
    """Size and build cost of the demo's and pipe -T's dumps; with --baseline, the same
    with another build in the same run, and the ratios (the issue's bar: 1.5x)."""
    builds = [("this build", HYBTRACE)] + ([("baseline", args.baseline)] if args.baseline
                                           else [])
    for scenario in ("demo", "pipe"):
        medians = []
        for name, binary in builds:
            dumps = window_dumps(binary, scenario, args.smoke)
            size = statistics.median(b for b, _ in dumps)
            cpu = statistics.median(c for _, c in dumps)
            medians.append((size, cpu))
            log("  %-4s windows, %-10s: %d dumps, median %d bytes, %.2f ms of CPU to build "
                "and write" % (scenario, name, len(dumps), size, cpu))
        if len(medians) == 2 and medians[1][0] and medians[1][1]:
            log("  %-4s windows, this build / baseline: size %.2fx, CPU %.2fx" % (
                scenario, medians[0][0] / medians[1][0], medians[0][1] / medians[1][1]))


def section_dump_cost(args, out):
    log("\n6. dump cost: 20 ms window of 4 busy threads on every CPU (manual dumps), defaults")
    manual_dumps(args)
    breach_storm(args)
    dump_windows(args)


def section_marks(args, out):
    """One user mark against a bare rdtsc, in the same run."""
    n = "2000000" if args.smoke else "100000000"
    p = subprocess.run([os.path.join(ROOT, "build", "bench", "mark_bench"), n,
                        "3" if args.smoke else "20"], capture_output=True, text=True, timeout=600)
    log("\n7. user marks (include/hybtrace/mark.h) against a bare rdtsc")
    m = re.search(r"mark - rdtsc\s+([-\d.]+) ns", p.stdout)
    if p.returncode != 0 or not m:
        raise BenchFailure("mark_bench exited with %d without its result: %s" % (
            p.returncode, (p.stdout + p.stderr)[-2000:]))
    for line in p.stdout.splitlines():
        log("  " + line)
    log("  %s" % verdict(float(m.group(1)), 5, " ns over rdtsc"))


def section_decode(args, out):
    """Intel PT decode speed on a synthesized stream: no PT hardware, no root needed."""
    if not os.access(BENCH_DECODE, os.X_OK):
        raise BenchFailure("%s is missing: run make build/bench/bench_decode" % BENCH_DECODE)
    cmd = [BENCH_DECODE, "--runs", str(args.runs), "--workload", os.path.join(ROOT, "tests", "pt")]
    if args.smoke:
        cmd.append("--smoke")
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=3600, cwd=ROOT)
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    if p.returncode or not lines:
        raise BenchFailure("bench_decode failed (exit %d):\n%s" % (
            p.returncode, (p.stdout + p.stderr)[-2000:]))
    r = json.loads(lines[-1])
    log("\n8. Intel PT decode: %.1f MB of PT (%.1f M instructions), one single-stepped loop "
        "iteration repeated; median of %d run%s in thread CPU time%s" % (
            r["stream_mb"], r["stream_minsn"], r["runs"], "" if r["runs"] == 1 else "s",
            " (smoke: under the 10 MB the target asks for)" if r["stream_mb"] < 10 else ""))
    for key, name in (("libipt", "libipt block decoder alone"),
                      ("libipt_calls", "libipt, blocks ending at calls and jumps"),
                      ("decode", "ht_pt_decode, counting only"),
                      ("path", "whole path: call stacks, timeline, Perfetto file")):
        log("  %-48s %8.1f MB/s of PT %8.1f M instructions/s" % (
            name, r[key + "_mb_s"], r[key + "_minsn_s"]))
    log("  whole path: %.3f s to the timeline, %.3f s to the file; %.1f M slices, %.1f MB written"
        % (r["path_timeline_s"], r["path_write_s"], r["slices"] / 1e6, r["file_bytes"] / 1e6))
    # Where the time goes, in units of the least libipt must do to see call stacks.
    unit_s = r["libipt_calls_s"]
    log("  time over libipt ending blocks at calls and jumps: ht_pt_decode %.2fx; call stacks "
        "and timeline %.2fx more; the file %.2fx more; one slice per %.0f instructions" % (
            r["decode_s"] / unit_s, (r["path_timeline_s"] - r["decode_s"]) / unit_s,
            r["path_write_s"] / unit_s, r["stream_minsn"] * 1e6 / max(1, r["slices"])))
    # Speed is 1/time: the whole path over libipt alone is libipt's time over the path's,
    # taken within each round (the stages take turns, seconds apart).
    point, lo, hi = paired_ratio(r["libipt_runs"], r["path_runs"])
    log("  %-48s %.3fx [%.3f, %.3f]  target >= 0.5x: %s" % (
        "whole path / libipt alone (instructions/s)", point, lo, hi,
        "met" if lo >= 0.5 else "NOT met"))
    return r


def hybtrace_watching_targets(out, opts):
    """hybtrace watching what OPTS name (--cgroup, --all), once it says it is attached."""
    return Background([HYBTRACE, "--quiet", "--json", "--output", out] + opts,
                      r'"type":"attached"')


def section_service(args, out):
    """A service of 100 processes in a cgroup of its own (many_procs pingpong: 50 pairs
    passing a byte), watched through --cgroup; and every task watched (--all) beside
    bpftrace's runqlat, which watches every task too, on the service and on perf bench."""
    title = "10. a 100-process service: many_procs pingpong 100, usecs/message"
    missing = [o for o in ("--cgroup", "--all") if not harness.hybtrace_knows(o)]
    if missing:
        log("\n%s\n  skipped: this hybtrace has no %s" % (title, " or ".join(missing)))
        return None
    # About 2 us a message on 2 CPUs: 0.8 s a run (run to run within 7% at half of it).
    rounds = 200 if args.smoke else 4000
    cmd = [os.path.join(WORKLOADS, "many_procs"), "pingpong", "100", str(rounds)]
    try:
        cg = harness.Cgroup(prefix="hybtrace-bench")
    except harness.Skip as e:
        raise BenchFailure("cannot make the service's cgroup: %s" % e)

    def watch(opts):
        return lambda: hybtrace_watching_targets(out, opts)
    try:
        configs = [
            ("untraced", (), None),
            ("empty BPF on sched_switch+wakeup (floor)", (), empty_progs),
            ("hybtrace --cgroup, defaults", (), watch(["--cgroup", cg.path])),
            ("hybtrace --cgroup --source none", (), watch(["--cgroup", cg.path, "--source",
                                                           "none"])),
            ("hybtrace --all, defaults", (), watch(["--all"])),
            ("hybtrace --all --source none", (), watch(["--all", "--source", "none"])),
            ("bpftrace runqlat logic", (), bpftrace_runqlat),
        ]
        # Untraced too, the service runs in its cgroup: every configuration alike.
        results = interleave(configs, args.runs, cmd, preexec_fn=cg.join)
    finally:
        cg.remove()
    print_ratios(title, results, "untraced", {})
    print_over("--cgroup over the empty programs, same run",
               results["hybtrace --cgroup, defaults"],
               results["empty BPF on sched_switch+wakeup (floor)"])
    for name in ("hybtrace --all, defaults", "hybtrace --all --source none"):
        print_over("%s over bpftrace runqlat" % name[9:], results[name],
                   results["bpftrace runqlat logic"])
    # The machine-wide peers on the usual microbenchmark, where every switch is watched.
    loops = 20000 if args.smoke else 200000
    configs = [
        ("untraced", (), None),
        ("hybtrace --all, defaults", (), watch(["--all"])),
        ("hybtrace --all --source none", (), watch(["--all", "--source", "none"])),
        ("bpftrace runqlat logic", (), bpftrace_runqlat),
    ]
    pipe = interleave(configs, args.runs, pipe_cmd(loops))
    print_ratios("   every task watched: perf bench sched pipe -T, usecs/op", pipe, "untraced", {})
    for name in ("hybtrace --all, defaults", "hybtrace --all --source none"):
        print_over("%s over bpftrace runqlat" % name[9:], pipe[name],
                   pipe["bpftrace runqlat logic"])
    return results, pipe


NGINX_WORKERS = 4
NGINX_CONNECTIONS = 8


def nginx_round(config, seconds, out):
    """One run of nginx (a master and NGINX_WORKERS workers) under http_load for SECONDS,
    watched as CONFIG says: usecs per request (1 / the load's requests per second)."""
    ng = services.Nginx(NGINX_WORKERS)
    cg = bg = None
    try:
        if config == "run":
            bg = Background([HYBTRACE, "run", "--quiet", "--json", "--output", out, "--"] +
                            ng.command(), r'"type":"attached"')
            ng.wait_ready(proc=bg.p)
        else:
            if config == "cgroup":
                cg = harness.Cgroup(prefix="hybtrace-bench-nginx")
            ng.start(preexec_fn=cg.join if cg else None)
            ng.wait_ready()
            if config == "cgroup":
                bg = hybtrace_watching_targets(out, ["--cgroup", cg.path])
            elif config == "pid":
                pids = [ng.master] + ng.workers()
                bg = hybtrace_watching_targets(out, ["--pid", ",".join(map(str, pids)),
                                                     "--children"])
        done = services.http_load(ng.port, NGINX_CONNECTIONS, seconds, -1,
                                  os.path.join(out, "http_load.log"))
        if done["errors"] or not done["requests"]:
            raise BenchFailure("http_load under %s: %r" % (config, done))
        if config == "run":
            # hybtrace ends with nginx.
            ng.stop()
            bg.p.wait(timeout=60)
        elif bg:
            bg.stop()
            bg = None
        return 1e6 / done["per_s"]
    except harness.Failure as e:
        raise BenchFailure(str(e))
    finally:
        if bg:
            bg.stop(check=False)
        ng.close()
        if cg:
            cg.remove()


def section_nginx(args, out):
    """nginx from Debian, a master and 4 workers, serving http_load's keep-alive requests on
    2 CPUs, untraced and watched the three ways a service is: its cgroup, its processes' pids
    with --children, and run; hybtrace with its defaults."""
    title = "11. nginx, %d workers, under http_load (%d connections): usecs/request" % (
        NGINX_WORKERS, NGINX_CONNECTIONS)
    if not os.access(services.NGINX, os.X_OK):
        log("\n%s\n  skipped: nginx is not installed (make deps installs it)" % title)
        return None
    seconds = 1 if args.smoke else 4
    configs = [("untraced", "untraced"), ("hybtrace --cgroup", "cgroup"),
               ("hybtrace --pid (all 5) --children", "pid"), ("hybtrace run -- nginx", "run")]
    results = {name: [] for name, _ in configs}
    for _ in range(args.runs):
        for name, config in configs:
            results[name].append(nginx_round(config, seconds, out))
    print_ratios(title, results, "untraced", {})
    return results


WAIT_CHAIN_DELAY_MS = 20


def chain_round(depth, rounds, out, smoke):
    """One run of wait_chain pipes (A reads B's pipe, B reads C's, C sleeps 20 ms) under
    hybtrace run --off-cpu 10ms --chain-depth DEPTH, a dump of each of A's reads: A's mean
    round and median wait (ms, its log), the run's CPU seconds, the off-CPU dumps' cpu_ns,
    and the counts of dumps of other kinds and of chain lines. A smoke run asks for one dump:
    on a loaded machine the builder, at nice 19, may not finish one within A's pause, and
    the next read is then not dumped (the figures of a smoke run are not kept)."""
    with tempfile.TemporaryDirectory(prefix="hybtrace-bench-chain-", dir=out) as d:
        log_path, dumps = os.path.join(d, "log"), os.path.join(d, "dumps")
        os.mkdir(dumps)
        # No --max-dumps limit within a run: past it, breaches would be skipped or replace
        # dumps (a build more).
        cmd = [HYBTRACE, "run", "--quiet", "--json", "--no-children", "--off-cpu", "10ms",
               "--min-interval", "0ms", "--max-dumps", "10000", "--chain-depth", str(depth),
               "--output", dumps, "--", os.path.join(WORKLOADS, "wait_chain"), "pipes",
               str(WAIT_CHAIN_DELAY_MS), str(rounds)]
        # The run's processes are this one's only children meanwhile: hybtrace, and the
        # workload it reaps (which reaps B and C).
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, HT_WORKLOAD_LOG=log_path))
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        what = "hybtrace --chain-depth %d" % depth
        if p.returncode:
            raise BenchFailure("%s exited with %d: %s" % (what, p.returncode, p.stderr[-2000:]))
        starts, waits = [], []
        with open(log_path) as f:
            for line in f:
                o = json.loads(line)
                if o["event"] == "a_read_start":
                    starts.append(o["ts_ns"])
                elif o["event"] == "a_read_end":
                    waits.append(o["waited_ns"] / 1e6)
    if len(starts) != rounds or len(waits) != rounds:
        raise BenchFailure("%s: wait_chain logged %d reads of %d rounds" % (
            what, len(waits), rounds))
    lines = [json.loads(l) for l in p.stdout.splitlines() if l.startswith('{"type":')]
    dumps = [o for o in lines if o["type"] == "dump"]
    off_cpu = [o["cpu_ns"] for o in dumps if o["kind"] == "off-cpu"]
    chains = sum(o["type"] == "chain" for o in lines)
    # A dump of (nearly) every read; with chains a chain line with each dump, without none.
    if len(off_cpu) < (1 if smoke else rounds // 2 + 1):
        raise BenchFailure("%s dumped %d of %d off-CPU waits" % (what, len(off_cpu), rounds))
    if (chains == 0) != (depth == 0):
        raise BenchFailure("%s wrote %d chain lines for %d dumps" % (what, chains, len(dumps)))
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"round": (starts[-1] - starts[0]) / 1e6 / (rounds - 1),
            "wait": statistics.median(waits), "cpu": cpu_s, "dumps": off_cpu,
            "other": len(dumps) - len(off_cpu), "chains": chains}


def section_chain(args, out):
    """What wait chains cost: wait_chain pipes, three processes chained by pipes, A's read of
    the chain an off-CPU breach each round and each dumped, under hybtrace run with
    --chain-depth 3 and 0 in the same rounds (in turn first). The workload's own measure is
    A's round: its read of the chain, then its 50 ms pause in 1 ms sleeps, while the dump
    is built. A dump's cost is its builder's CPU, the dump line's cpu_ns; the target is 1.1x
    with chains over without. One dump of each run costs several times the others (the
    symbols read), not always the first: each run counts the median of its dumps."""
    rounds = 5 if args.smoke else 15
    h = subprocess.run([HYBTRACE, "--help"], capture_output=True, text=True)
    title = ("12. wait chains: wait_chain pipes %d %d under run --no-children --off-cpu 10ms "
             "--min-interval 0ms, a dump of each of A's reads; --chain-depth 3 against 0, "
             "%d interleaved rounds" % (WAIT_CHAIN_DELAY_MS, rounds, args.runs))
    if "--chain-depth" not in h.stdout + h.stderr:
        log("\n%s\n  skipped: this hybtrace has no --chain-depth" % title)
        return None
    results = {0: [], 3: []}
    for i in range(args.runs):
        for depth in ((0, 3) if i % 2 == 0 else (3, 0)):
            results[depth].append(chain_round(depth, rounds, out, args.smoke))
    log("\n%s (medians; ratios: median of per-round ratios, 95%% interval)" % title)
    log("  %-52s %9s %9s  %s" % ("", "no chains", "chains", "chains / no chains"))

    def row(label, values, target=None, scale=1.0):
        without, with_ = values(results[0]), values(results[3])
        point, lo, hi = paired_ratio(with_, without)
        log("  %-52s %9.3f %9.3f  %.3fx [%.3f, %.3f]  %s" % (
            label, statistics.median(without) * scale, statistics.median(with_) * scale,
            point, lo, hi, verdict(hi, target)))
    row("A's round (read of the chain, 50 ms pause), ms", lambda rs: [r["round"] for r in rs])
    row("A's read, its wait on the chain, ms", lambda rs: [r["wait"] for r in rs])
    row("CPU of the run (hybtrace, its start, the workload), s",
        lambda rs: [r["cpu"] for r in rs])
    row("dump CPU (cpu_ns, a run's off-CPU dumps), ms",
        lambda rs: [statistics.median(r["dumps"]) for r in rs], 1.1, 1e-6)
    log("  %-52s %9d %9d" % ("off-CPU dumps", *(sum(len(r["dumps"]) for r in results[d])
                                                 for d in (0, 3))))
    log("  %-52s %9d %9d" % ("chain lines", *(sum(r["chains"] for r in results[d])
                                               for d in (0, 3))))
    log("  %-52s %9d %9d" % ("dumps of other kinds (A's run-queue waits), left out",
                             *(sum(r["other"] for r in results[d]) for d in (0, 3))))
    return results


SECTIONS = {
    "self": section_overhead_self,
    "others": section_overhead_others,
    "messaging": section_messaging,
    "bpf": section_bpf_cost,
    "latency": section_trigger_latency,
    "dump": section_dump_cost,
    "marks": section_marks,
    "decode": section_decode,
    "softirq": section_softirq_cost,
    "service": section_service,
    "nginx": section_nginx,
    "chain": section_chain,
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", action="store_true", help="one short iteration of everything")
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--only", nargs="*", choices=sorted(SECTIONS))
    ap.add_argument("--baseline", metavar="HYBTRACE",
                    help="another build's binary: section 6 measures its dumps too")
    args = ap.parse_args()
    if args.smoke:
        args.runs = 1
    if os.geteuid() != 0:
        sys.exit("make bench needs root (BPF, perf, bpftrace)")
    for tool in ("perf", "bpftrace", "bpftool", "taskset"):
        if not shutil.which(tool):
            sys.exit("bench needs %s (make bench installs it)" % tool)
    ensure_tracefs()
    log("hybtrace bench on %s%s" % (machine(), " (smoke run)" if args.smoke else ""))
    began_s = time.monotonic()
    failed = []
    with tempfile.TemporaryDirectory() as out:
        for name in args.only or SECTIONS:
            # One broken section does not lose the others' figures, but fails the run.
            try:
                SECTIONS[name](args, out)
            except (BenchFailure, RuntimeError, subprocess.SubprocessError, OSError,
                    ValueError, KeyError) as e:
                log("\nFAILED section %s: %s" % (name, e))
                failed.append(name)
    log("\nbench took %.1f minutes" % ((time.monotonic() - began_s) / 60))
    if failed:
        log("\nbench failed: %s" % ", ".join(failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
