#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""Run every integration test (tests/integration/test_*.py), one at a time.

usage: run_all.py [NAME_SUBSTRING...]
"""
import glob
import importlib.util
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(__file__))
import harness  # noqa: E402


def load_modules():
    here = os.path.dirname(os.path.abspath(__file__))
    for path in sorted(glob.glob(os.path.join(here, "test_*.py"))):
        name = os.path.splitext(os.path.basename(path))[0]
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


def main():
    load_modules()
    wanted = sys.argv[1:]
    failed = 0
    for fn in harness.TESTS:
        name = "%s.%s" % (fn.__module__, fn.__name__)
        if wanted and not any(w in name for w in wanted):
            continue
        start = time.monotonic()
        try:
            note = fn()
        except harness.Skip as e:
            if harness.in_ci() and not isinstance(e, harness.NoHardware):
                print("FAIL %s: cannot skip under CI: %s" % (name, e))
                failed += 1
            else:
                print("SKIP %s: %s" % (name, e))
        except harness.Failure as e:
            print("FAIL %s: %s" % (name, str(e).replace("\n", "\n     ")))
            failed += 1
        except Exception:  # a crash in the test itself is a failure too
            print("FAIL %s: %s" % (name, traceback.format_exc().replace("\n", "\n     ")))
            failed += 1
        else:
            # A test may say what it measured.
            print("PASS %s (%.1fs)%s" % (name, time.monotonic() - start,
                                         ": %s" % note if isinstance(note, str) else ""))
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
