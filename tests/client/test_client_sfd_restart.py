#!/usr/bin/python3
"""The Python binding against the real sfd: kill -9 the daemon mid-run, the
client carries on (every call returns, no SIGPIPE), counts its drops, and
after a restart reconnects with a new hello and delivers again.

Usage: test_client_sfd_restart.py SFD SFCTL
Waits are on real conditions (a socket file, client counters) with an
overall deadline; the short sleep inside each step is the training work.
"""
import os
import signal
import subprocess
import sys
import tempfile
import time

import stagefrontier as sf

DEADLINE_S = 60.0


def fail(what):
    print("FAIL:", what)
    sys.exit(1)


def start_sfd(sfd, d):
    log = open(os.path.join(d, "sfd.log"), "ab")
    return subprocess.Popen([sfd, "--config", os.path.join(d, "sfd.conf"), "--runtime-dir", d,
                             "--foreground"], stdout=log, stderr=subprocess.STDOUT)


def wait_for(cond, what, step=None):
    end = time.monotonic() + DEADLINE_S
    while not cond():
        if time.monotonic() > end:
            fail("timed out waiting for " + what)
        if step:
            step()
        else:
            time.sleep(0.01)


def main():
    sfd, sfctl = sys.argv[1], sys.argv[2]
    d = tempfile.mkdtemp(prefix="sfclient-sfd-")
    open(os.path.join(d, "sfd.conf"), "w").close()
    sock = os.path.join(d, "ingest.sock")
    daemon = start_sfd(sfd, d)
    wait_for(lambda: os.path.exists(sock), "the ingest socket")

    rec = sf.Recorder(job_id="client-restart", socket=sock, rank=0, world_size=1)
    steps = [0]

    def step():
        with rec.step():
            with rec.stage("model.fwd_loss_cpu_wall"):
                time.sleep(0.001)
        rec.flush()
        steps[0] += 1

    wait_for(lambda: rec.stats()["records_sent"] >= 20, "records delivered", step)
    os.kill(daemon.pid, signal.SIGKILL)
    daemon.wait()
    wait_for(lambda: not rec.stats()["connected"], "the client to notice", step)
    for _ in range(50):
        step()
    st = rec.stats()
    if st["records_dropped"] == 0:
        fail("no drops counted while the daemon was down: %r" % st)
    sent_before = st["records_sent"]

    daemon = start_sfd(sfd, d)
    wait_for(lambda: rec.stats()["reconnects"] >= 1, "the reconnect", step)
    wait_for(lambda: rec.stats()["records_sent"] > sent_before + 20, "delivery after restart",
             step)
    st = rec.stats()
    if st["steps"] != steps[0] or st["connects"] != 2:
        fail("counters %r after %d steps" % (st, steps[0]))
    rec.close()
    out = subprocess.run([sfctl, "--socket", os.path.join(d, "query.sock"), "jobs"],
                         capture_output=True, text=True, timeout=30)
    if out.returncode != 0 or "client-restart" not in out.stdout:
        fail("sfctl jobs: rc %d\n%s%s" % (out.returncode, out.stdout, out.stderr))
    daemon.send_signal(signal.SIGTERM)
    if daemon.wait(timeout=30) != 0:
        fail("sfd exit status %d" % daemon.returncode)
    print("ok: %d steps, %r" % (steps[0], st))


if __name__ == "__main__":
    main()
