#!/usr/bin/env python3
"""The monitor's knobs are one settings block, set in one place.

Every `const volatile` knob of the monitor's BPF side (bpf/monitor.bpf.c and the
bpf/*.bpf.h headers it includes) is declared in bpf/settings.bpf.h, and
set_settings() in userspace/kernel/monitor.c sets each of them, in the same order,
and is the only code that writes the monitor's rodata. A knob declared elsewhere, or
left unset (it would silently keep its default), fails. Prints a FAIL line per
problem, or one PASS line.
"""
import glob
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SETTINGS = "bpf/settings.bpf.h"
MONITOR_C = "userspace/kernel/monitor.c"

KNOB = re.compile(r"^\s*const\s+volatile\s+[\w\s]+?\b(\w+)\s*(?:\[[^\]]*\])*\s*=", re.M)
RODATA_WRITE = re.compile(r"skel->rodata->(\w+)\s*=|memcpy\(\(void \*\)skel->rodata->(\w+)")


def read(rel):
    with open(os.path.join(ROOT, rel)) as f:
        return f.read()


def problems():
    out = []
    if not os.path.exists(os.path.join(ROOT, SETTINGS)):
        return ["%s is missing" % SETTINGS]
    knobs = KNOB.findall(read(SETTINGS))
    if not knobs:
        out.append("%s declares no knob" % SETTINGS)
    for path in sorted(glob.glob(os.path.join(ROOT, "bpf", "*.bpf.h")) +
                       [os.path.join(ROOT, "bpf", "monitor.bpf.c")]):
        rel = os.path.relpath(path, ROOT)
        if rel == SETTINGS:
            continue
        for name in KNOB.findall(read(rel)):
            out.append("%s declares the knob %s: it belongs in %s" % (rel, name, SETTINGS))

    text = read(MONITOR_C)
    m = re.search(r"^static void set_settings\(.*?^}", text, re.M | re.S)
    if not m:
        return out + ["%s has no set_settings()" % MONITOR_C]
    body = m.group(0)
    rest = text[:m.start()] + text[m.end():]
    set_order = [a or b for a, b in RODATA_WRITE.findall(body)]
    for name in knobs:
        if name not in set_order:
            out.append("set_settings() does not set %s (%s)" % (name, SETTINGS))
    for name in set_order:
        if name not in knobs:
            out.append("set_settings() sets %s, which %s does not declare" % (name, SETTINGS))
    common = [n for n in set_order if n in knobs]
    if len(set(common)) != len(common):
        out.append("set_settings() sets a knob twice")
    elif common != [n for n in knobs if n in common]:
        out.append("set_settings() sets the knobs in another order than %s" % SETTINGS)
    for a, b in RODATA_WRITE.findall(rest):
        out.append("%s writes rodata %s outside set_settings()" % (MONITOR_C, a or b))
    return out


def main():
    found = problems()
    for p in found:
        print("FAIL bpf-settings: %s" % p)
    if not found:
        print("PASS bpf-settings: every knob of the monitor is in %s and set by set_settings()"
              % SETTINGS)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
