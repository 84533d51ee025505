"""sfctl against a live sfd: exit codes and messages for a missing daemon,
unknown jobs and windows, bad usage; report with and without JOB; record;
watch redrawing as windows close, with --count and on SIGINT."""

import json
import os
import signal
import subprocess

from sfdtest import SFCTL, Sfd, check, run_job, spawn, wait_for

CONF = """[sfd]
window_grace_ms = 300
[gates]
warmup_steps = 0
window_steps = 10
"""


def main():
    p = subprocess.run([SFCTL, "--socket", "/nonexistent/q.sock", "status"],
                       capture_output=True, timeout=60)
    check(p.returncode == 4 and b"not running" in p.stderr, "no daemon: %d %s"
          % (p.returncode, p.stderr))
    env = dict(os.environ, SF_QUERY_SOCKET="/nonexistent/env.sock")
    p = subprocess.run([SFCTL, "jobs"], capture_output=True, timeout=60, env=env)
    check(p.returncode == 4 and b"/nonexistent/env.sock" in p.stderr, "SF_QUERY_SOCKET")
    p = subprocess.run([SFCTL, "frobnicate"], capture_output=True, timeout=60)
    check(p.returncode == 2, "unknown command exit %d" % p.returncode)

    sfd = Sfd(CONF)
    try:
        sfd.sfctl("report", check_rc=5)                 # no job yet
        run_job(sfd, "one", 2, 20)
        wait_for(lambda: sfd.jobs()["one"]["windows"] == 2, "two windows")
        text = sfd.sfctl("report").stdout.decode()      # the only job
        check(text.startswith("window 1"), "human view: %r" % text[:80])
        check("route:" in text, "human view leads with the route")
        w0 = json.loads(sfd.sfctl("report", "one", "--window", "0", "--json").stdout)
        check(len(w0) == 1 and w0[0]["window"]["index"] == 0, "window 0")
        sfd.sfctl("report", "one", "--window", "99", check_rc=5)
        sfd.sfctl("report", "nope", check_rc=5)
        sfd.sfctl("ranks", "nope", check_rc=5)
        sfd.sfctl("ranks", check_rc=2)
        sfd.sfctl("report", "one", "--window", "x", check_rc=2)
        ranks = json.loads(sfd.sfctl("ranks", "one", "--json").stdout)
        check([r["records"] for r in ranks["ranks"]] == [20, 20], "ranks: %s" % ranks)
        check("RANK" in sfd.sfctl("ranks", "one").stdout.decode(), "ranks table")
        check("one" in sfd.sfctl("jobs").stdout.decode(), "jobs table")
        rec = os.path.join(sfd.dir, "one.jsonl")
        sfd.sfctl("record", "one", "-o", rec)
        with open(rec) as f:
            lines = [json.loads(x) for x in f]
        check(lines[0].get("type") == "header", "record header: %s" % lines[0])
        check(sum(1 for x in lines if x.get("type") == "row") == 40, "record rows")

        # Job two runs in two halves, paused between them: watch sees it alive.
        two = spawn(sfd, job="two", rank=0, world=1, steps=20, batch=10, pause_every=10,
                    hold=True)
        check(two.stdout.readline().decode().startswith("paused"), "job two paused")
        wait_for(lambda: sfd.jobs().get("two", {}).get("windows") == 1, "job two")
        sfd.sfctl("report", check_rc=2)                 # several jobs: name one

        # watch: prints the current report, then again when a new window closes.
        w = subprocess.Popen([SFCTL, "--socket", sfd.query, "watch", "two", "--count", "2",
                              "--interval", "50"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        first = w.stdout.readline().decode()
        check(first.startswith("window 0"), "watch first draw: %r" % first)
        two.stdin.write(b"\n")
        two.stdin.flush()
        check(two.stdout.readline().decode().startswith("holding"), "job two holding")
        out, err = w.communicate(timeout=120)
        check(w.returncode == 0, "watch exit %d: %s" % (w.returncode, err))
        check("window 1" in out.decode(), "watch second draw")
        check(b"\033[2J" not in out, "no screen clearing when stdout is not a tty")

        w = subprocess.Popen([SFCTL, "--socket", sfd.query, "watch", "two", "--interval", "50"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        check(w.stdout.readline().decode().startswith("window 1"), "watch draw")
        w.send_signal(signal.SIGINT)
        w.communicate(timeout=60)
        check(w.returncode == 0, "watch on SIGINT exit %d" % w.returncode)
        two.communicate(timeout=60)     # EOF on stdin ends the held sender
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
