"""A job asks for its own window and warmup sizes in the hello (SF_WINDOW_STEPS,
SF_WARMUP_STEPS): sfd windows it that way, clamps what is out of bounds and
says so in `sfctl jobs --json` and its log; a job that asks nothing gets the
daemon's configuration."""

import json
import os
import subprocess

from sfdtest import TIMEOUT, Sfd, check, wait_for

CLIENT = os.environ.get("SF_CLIENT_JOB")
CONF = """[sfd]
window_grace_ms = 200
[gates]
warmup_steps = 0
window_steps = 10
"""


def run_client(sfd, job, steps, env):
    e = dict(os.environ, **env)
    p = subprocess.run([CLIENT, sfd.ingest, job, "0", "1", str(steps), "-2", "0", "0"],
                       capture_output=True, timeout=TIMEOUT * 2, env=e)
    check(p.returncode == 0, "client rc %d: %s" % (p.returncode, p.stderr.decode()))


def main():
    if not CLIENT:
        print("skipped: the client library is not part of this build")
        return
    sfd = Sfd(CONF)
    try:
        run_client(sfd, "asks", 22, {"SF_WINDOW_STEPS": "5", "SF_WARMUP_STEPS": "2"})
        run_client(sfd, "plain", 20, {})
        run_client(sfd, "greedy", 3, {"SF_WINDOW_STEPS": "1000000"})
        wait_for(lambda: sfd.jobs()["asks"]["windows"] == 4, "four windows of five steps")
        jobs = sfd.jobs()
        a = jobs["asks"]
        check((a["window_steps"], a["warmup_steps"], a["window_geometry"]) == (5, 2, "job"),
              "asked geometry: %s" % a)
        w = json.loads(sfd.sfctl("report", "asks", "--window", "0", "--json").stdout)[0]
        check((w["window"]["first_step"], w["window"]["last_step"]) == (2, 6),
              "window 0 of the asking job: %s" % w["window"])
        p = jobs["plain"]
        check((p["window_steps"], p["warmup_steps"], p["window_geometry"]) == (10, 0, "daemon"),
              "daemon geometry: %s" % p)
        g = jobs["greedy"]
        check((g["window_steps"], g["window_geometry"]) == (16384, "clamped"),
              "clamped geometry: %s" % g)
        check("clamped" in sfd.logtext(), "sfd does not log the clamp")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()


if __name__ == "__main__":
    main()
