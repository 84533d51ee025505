#!/usr/bin/python3
"""The Python binding against the real sfd: kill -9 the daemon mid-run, the
client carries on (every call returns, no SIGPIPE), counts its drops, and
after a restart reconnects with a new hello and delivers again.

Runs through the shared sfd test harness (tests/sfd/sfdtest.py; SFD and SFCTL
in the environment). Waits are on real conditions (the query socket, client
counters) with an overall deadline; the short sleep inside each step is the
training work.
"""
import os
import signal
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sfd"))
import sfdtest  # noqa: E402  (path set above)
import stagefrontier as sf  # noqa: E402


def main():
    daemon = sfdtest.Sfd()
    try:
        rec = sf.Recorder(job_id="client-restart", socket=daemon.ingest, rank=0, world_size=1)
        steps = [0]

        def step():
            with rec.step():
                with rec.stage("model.fwd_loss_cpu_wall"):
                    time.sleep(0.001)
            rec.flush()
            steps[0] += 1

        def training_until(cond):
            """A wait predicate that trains one step per poll."""
            return lambda: (step(), cond())[1]

        sfdtest.wait_for(training_until(lambda: rec.stats()["records_sent"] >= 20),
                         "records delivered", interval=0)
        os.kill(daemon.pid(), signal.SIGKILL)
        daemon.proc.wait()
        sfdtest.wait_for(training_until(lambda: not rec.stats()["connected"]),
                         "the client to notice", interval=0)
        for _ in range(50):
            step()
        st = rec.stats()
        sfdtest.check(st["records_dropped"] > 0,
                      "no drops counted while the daemon was down: %r" % st)
        sent_before = st["records_sent"]

        daemon.start(wait=False)
        sfdtest.wait_for(training_until(lambda: rec.stats()["reconnects"] >= 1),
                         "the reconnect", interval=0)
        sfdtest.wait_for(training_until(lambda: rec.stats()["records_sent"] > sent_before + 20),
                         "delivery after restart", interval=0)
        st = rec.stats()
        sfdtest.check(st["steps"] == steps[0] and st["connects"] == 2,
                      "counters %r after %d steps" % (st, steps[0]))
        rec.close()
        out = daemon.sfctl("jobs").stdout.decode()
        sfdtest.check("client-restart" in out, "sfctl jobs: %s" % out)
        sfdtest.check(daemon.stop() == 0, "sfd exit status %s" % daemon.proc.returncode)
        print("ok: %d steps, %r" % (steps[0], st))
    finally:
        daemon.close()


if __name__ == "__main__":
    main()
