"""A job of one rank through the real sfd: every window gets a report with
no stage leader (there is no runner-up to lead), and sfd reports no undefined
behaviour on the way. CI also runs this test in its clang UBSan build, where
the missing runner-up once overflowed the leader gap."""

import json

from sfdtest import Sfd, check, send, wait_for

CONF = """[gates]
warmup_steps = 0
window_steps = 10
"""


def main():
    sfd = Sfd(CONF)
    try:
        rc, out, p = send(sfd, job="solo", rank=0, world=1, steps=30, step_us=200)
        check(rc == 0 and out["sent"] == "30", "sender: %s %s" % (out, p.stderr.decode()))
        wait_for(lambda: sfd.jobs()["solo"]["windows"] == 3, "three windows of solo")
        reports = json.loads(sfd.sfctl("report", "solo", "--last", "3", "--json").stdout)
        check(len(reports) == 3, "want 3 reports, got %d" % len(reports))
        for w in reports:
            check(all(s["leader_rank"] is None for s in w["stages"]),
                  "window %s names a leader in a world of one" % w.get("window"))
        check(sfd.stop() == 0, "sfd did not stop cleanly")     # and no "runtime error"
    finally:
        sfd.close()


if __name__ == "__main__":
    main()
