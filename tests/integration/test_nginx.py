# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""The acceptance check of whole services (issue 17) on a real multi-process server:
Debian's nginx, a master and 4 workers on a private configuration, under an HTTP load,
with a CPU hog pinned beside it, watched four ways: by its cgroup, by its master's pid
with --children (the workers a reload forks after attach become targets), under `run`,
and as a unit of a real systemd by --unit (stopping the unit ends hybtrace). The breaches
are of nginx's workers as nginx's pid file and /proc say them, none of a process outside
(the hog, the load), and the workers' waits name the hog; the dumps open in Perfetto's
importer with the breached worker in them."""
import os
import tempfile

from harness import Attached, Cgroup, check, test
from services import (Hog, Nginx, SystemdUser, check_named_hog,
                      check_service_breaches, check_service_dumps, describe, http_load,
                      need_nginx, need_service_targets, pinned)

WORKERS = 4
CONNECTIONS = 8
LOAD_S = 3
# Run-queue waits alone: the workers share CPU 0 with the hog, the load runs on CPU 1.
OPTIONS = ["--json", "--quiet", "--rq-delay", "500us", "--max-dumps", "2",
           "--min-interval", "500ms"]


def nginx_watched(mode):
    """nginx (master and workers on CPU 0, beside a hog pinned there) under http_load
    (CPU 1), watched as MODE says: "cgroup", "pid" (--pid MASTER --children, then a
    reload), "run", or "unit" (nginx the service of a systemd unit, --unit NAME; the
    unit stopped while watched)."""
    need_service_targets()
    need_nginx()
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "dumps")
        os.mkdir(out)
        opts = OPTIONS + ["--output", out]
        nginx = Nginx(WORKERS)
        hog = ht = cg = systemd = None
        old_workers = []
        try:
            hog = Hog(0, os.path.join(tmp, "hog.log"))
            if mode == "cgroup":
                cg = Cgroup(prefix="hybtrace-nginx")
                nginx.start(pinned(0), preexec_fn=cg.join)
                nginx.wait_ready()
                ht = Attached(["--cgroup", cg.path] + opts)
                ht.wait_attached(30)
                workers = nginx.workers()
            elif mode == "pid":
                nginx.start(pinned(0))
                nginx.wait_ready()
                old_workers = nginx.workers()
                ht = Attached(["--pid", str(nginx.master), "--children"] + opts)
                ht.wait_attached(30)
                # The workers running now are not targets; those the reload forks are.
                workers = nginx.reload()
            elif mode == "unit":
                systemd = SystemdUser()
                unit = "hybtrace-nginx-%d" % os.getpid()
                systemd.add_unit(unit, ["ExecStart=" + " ".join(pinned(0) + nginx.command())])
                systemd.systemctl("start", unit)
                nginx.wait_ready()
                shown = systemd.show(unit, "ControlGroup", "MainPID")
                check(shown["MainPID"] == str(nginx.master),
                      "systemd says the unit's main process is %s, nginx's pid file %d"
                      % (shown["MainPID"], nginx.master))
                # systemd's word, and hybtrace's own reading of it (a bare unit name).
                ht = Attached(["--unit", unit] + opts, env=systemd.env(), wrap=systemd.wrap())
                ht.wait_attached(30)
                workers = nginx.workers()
            else:
                ht = Attached(["run"] + opts + ["--"] + pinned(0) + nginx.command())
                ht.wait_attached(30)
                nginx.wait_ready(proc=ht.proc)
                workers = nginx.workers()
            load = http_load(nginx.port, CONNECTIONS, LOAD_S, 1, os.path.join(tmp, "load"))
            check(load["requests"] > 0 and not load["errors"], "the load: %r" % load)
            if mode == "run":
                # hybtrace ends with its command, with its exit status.
                nginx.stop()
                rc = ht.wait(60)
            elif mode == "unit":
                # Stopped, the unit's cgroup goes: hybtrace ends with its summary, status 0.
                systemd.systemctl("stop", unit)
                rc = ht.wait(60)
            else:
                rc = ht.stop()
            check(rc == 0, "hybtrace:\n" + ht.describe())
            ht.close()
        finally:
            if ht:
                ht.close()
            nginx.close()
            if systemd:
                systemd.close()
            if hog:
                hog.close()
            if cg:
                cg.remove()
        attached = [o for o in ht.json_lines() if o.get("type") == "attached"][0]
        targets = attached["targets"]
        if mode == "cgroup":
            check(targets["cgroup"] and targets["cgroup"].endswith(cg.name),
                  "targets %r, not the cgroup %s" % (targets, cg.path))
        elif mode == "unit":
            check(targets["cgroup"] and targets["cgroup"].endswith(shown["ControlGroup"]),
                  "targets %r, not the unit's cgroup %s" % (targets, shown["ControlGroup"]))
        else:
            check(targets["pids"] == [nginx.master] and targets["children"] is True,
                  "targets %r, want the master %d and its children" % (targets, nginx.master))
        inside = {nginx.master: "the master"}
        inside.update({w: "a worker" for w in workers})
        outside = {hog.pid: "the hog (pf_hog)"}
        outside.update({w: "a worker running before attach" for w in old_workers})
        breaches = ht.breaches()
        # Under run the master is named by taskset, its first program, until it execs nginx.
        names = ("nginx", "taskset") if mode == "run" else ("nginx",)
        check_service_breaches(breaches, inside, outside, names, ht.describe)
        breached = {b["pid"] for b in breaches if b["pid"] in workers}
        check(len(breached) >= 2, "breaches of %d of the %d workers %r: %s"
              % (len(breached), WORKERS, workers, "; ".join(describe(b) for b in breaches[:10])))
        named = check_named_hog(breaches, set(workers), hog.pid, "workers")
        ndumps = check_service_dumps(out, breaches, inside)
        print("    %s: master %d, workers %r%s; %.0f requests/s; %d breaches (%d workers, "
              "%d waits behind the hog), %d dumps" % (
                  mode, nginx.master, workers,
                  " (forked by the reload; before it %r)" % old_workers if old_workers else "",
                  load["per_s"], len(breaches), len(breached), len(named), ndumps))


@test
def nginx_watched_by_its_cgroup():
    nginx_watched("cgroup")


@test
def nginx_watched_by_its_master_and_children():
    nginx_watched("pid")


@test
def nginx_watched_under_run():
    nginx_watched("run")


@test
def nginx_watched_as_a_systemd_unit():
    nginx_watched("unit")
