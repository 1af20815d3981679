#!/usr/bin/env python3
"""The folders of userspace/ are layers; an include may only point down.

    base <- trace <- symbols <- kernel <- sources, triggers <- dump <- cli <- main.c

A file may include headers of its own folder and of any lower layer. sources/* and
triggers/ are one layer but independent: a source includes no other source's folder and
no trigger (only sources/*.h, the interface every source implements), and triggers include
no source. Prints a FAIL line per file that breaks this, or one PASS line.
"""
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
USERSPACE = os.path.join(ROOT, "userspace")

RANKS = {"base": 0, "trace": 1, "symbols": 2, "kernel": 3, "sources": 4, "triggers": 4,
         "dump": 5, "cli": 6, "": 7}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def folder_of(rel):
    """The folder a userspace-relative path lies in: "sources/intelpt", "base", "" (main.c)."""
    return os.path.dirname(rel)


def layer_of(folder):
    return folder.split("/")[0]


def allowed(src_folder, header):
    """Why including HEADER (userspace-relative) from SRC_FOLDER breaks the layering, or None."""
    dst_folder = folder_of(header)
    if dst_folder == src_folder:
        return None
    src_layer, dst_layer = layer_of(src_folder), layer_of(dst_folder)
    if dst_layer not in RANKS:
        return "%s is in no layer" % header
    if src_layer == dst_layer == "sources":
        # A source may use the interface (sources/*.h), never another source.
        if dst_folder == "sources":
            return None
        return "one source includes another (%s)" % header
    if RANKS[dst_layer] >= RANKS[src_layer]:
        return "%s includes %s, which is not below it" % (src_folder or "main.c", header)
    return None


def check_file(path, as_folder):
    problems = []
    with open(path, errors="replace") as f:
        text = f.read()
    for header in INCLUDE.findall(text):
        if not os.path.exists(os.path.join(USERSPACE, header)):
            continue  # generated (skeletons, syscall table) or the project's public include/
        why = allowed(as_folder, header)
        if why:
            problems.append(why)
    return problems


def userspace_files():
    for dirpath, _, names in os.walk(USERSPACE):
        for name in sorted(names):
            if name.endswith((".c", ".h")):
                yield os.path.join(dirpath, name)


def main():
    failed = 0
    for path in userspace_files():
        rel = os.path.relpath(path, USERSPACE)
        problems = check_file(path, folder_of(rel))
        if problems:
            failed += 1
            print("FAIL layers:%s: %s" % (rel, "; ".join(problems)))
    if not failed:
        print("PASS layers: every include of userspace/ points down")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
