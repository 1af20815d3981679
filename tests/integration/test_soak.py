# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The soak in short: 30 s of steady breaches and dumps under ASan+LSan (`make soak` runs 10 min)."""
import os
import sys

from harness import ROOT, Failure, need_root, test

sys.path.insert(0, os.path.join(ROOT, "tests"))
import soak  # noqa: E402

SOAK_TEST_SECONDS = 30


@test
def soak_30s_flat_rss_fds_no_leaks():
    need_root()
    try:
        r = soak.run_soak(SOAK_TEST_SECONDS)
    except soak.SoakFailure as e:
        raise Failure(str(e))
    print("     %s" % r.describe())
