"""Parallel coordinates through the real sfd (docs/SFD.md, "Parallel
coordinates"): a 2 x 2 (pp x dp) job whose ranks 0..2 declare theirs and stay
connected, while rank 3's hellos come hostile: sizes that do not tile the
world, an index out of range, a schedule past the enum, another shape than
the job's, a tuple another rank holds. Each is refused and counted under its
reason; then rank 3 joins with its true coordinates, and a later hello of rank
3 that changes them is refused too. The other ranks are unaffected: every
record they sent is accepted, the job's windows hold all four ranks and say
role_aware_applied, and the replay of the job's recording equals its live
report."""

import json

from sfdtest import Sfd, check, live_equals_replay, send, spawn, wait_for

CONF = """[gates]
warmup_steps = 0
window_steps = 10
"""

JOB = "pj"
COORDS = {0: "pp=0/2,dp=0/2", 1: "pp=0/2,dp=1/2", 2: "pp=1/2,dp=0/2", 3: "pp=1/2,dp=1/2"}
STEPS = 40


def expect_reject(sfd, reason, **kw):
    before = sfd.rejected(reason)
    rc, out, p = send(sfd, mode="hello", job=JOB, world=4, **kw)
    check(rc == 0 and out.get("closed") == "yes",
          "%s %s: not closed (rc %d, %s %s)" % (reason, kw, rc, out, p.stderr.decode()))
    wait_for(lambda: sfd.rejected(reason) == before + 1, "counter %s to move" % reason)


def main():
    sfd = Sfd(CONF)
    holders = []
    try:
        for r in range(3):
            h = spawn(sfd, job=JOB, rank=r, world=4, steps=STEPS, hold=True, parallel=COORDS[r])
            check(h.stdout.readline().strip() == b"holding", "rank %d did not start" % r)
            holders.append(h)
        wait_for(lambda: sfd.jobs().get(JOB, {}).get("records", 0) == 3 * STEPS,
                 "the three ranks' records")

        expect_reject(sfd, "parallel_invalid", rank=3, parallel="pp=1/2,dp=1/4")  # 8 != 4
        expect_reject(sfd, "parallel_invalid", rank=3, parallel="pp=2/2,dp=1/2")  # index = size
        expect_reject(sfd, "parallel_invalid", rank=3, parallel="pp=1/2,dp=1/0")
        expect_reject(sfd, "parallel_invalid", rank=3, parallel="pp=1/2,dp=1/2,schedule=7")
        expect_reject(sfd, "parallel_invalid", rank=3, parallel="dp=1/4,schedule=1")  # no pp
        # sizes whose product is 2^80: it must not wrap to anything
        expect_reject(sfd, "parallel_invalid", rank=3,
                      parallel="pp=0/65536,tp=0/65536,dp=0/65536,cp=0/65536,ep=0/65536")
        expect_reject(sfd, "parallel_conflict", rank=3, parallel="pp=1/2,tp=1/2")  # shape
        expect_reject(sfd, "parallel_conflict", rank=3, parallel="pp=1/2,dp=1/2,schedule=1")
        expect_reject(sfd, "parallel_conflict", rank=3, parallel="pp=0/2,dp=1/2")  # rank 1's

        rc, out, p = send(sfd, job=JOB, rank=3, world=4, steps=STEPS, parallel=COORDS[3])
        check(rc == 0 and out["sent"] == str(STEPS), "rank 3: %s %s" % (out, p.stderr.decode()))
        wait_for(lambda: sfd.jobs()[JOB]["records"] == 4 * STEPS, "all four ranks' records")
        # Coordinates never change across a rank's hellos.
        expect_reject(sfd, "parallel_conflict", rank=3, generation=1, parallel="pp=1/2,dp=0/2")

        for h in holders:
            h.stdin.close()
            out = h.stdout.read().decode()
            check(h.wait() == 0 and "sent=%d " % STEPS in out and "dropped=0" in out,
                  "a held rank was affected: " + out)
        holders = []
        wait_for(lambda: sfd.jobs()[JOB]["windows"] >= STEPS // 10, "the job's windows")
        reports = json.loads(sfd.sfctl("report", JOB, "--last", "4", "--json").stdout)
        check(len(reports) == STEPS // 10, "want %d reports, got %d" % (STEPS // 10, len(reports)))
        for w in reports:
            win = w["window"]
            check(win["ranks"] == 4 and win["missing_ranks"] == 0, "window: %s" % win)
        for w in reports:
            check("role_aware_applied" in w["labels"], "labels: %s" % w["labels"])
        # The recording carries the coordinates: its replay is the live report.
        live_equals_replay(sfd, JOB)
        # Each rank's coordinates, as it declared them.
        ranks = json.loads(sfd.sfctl("ranks", JOB, "--json").stdout)
        ranks = ranks["ranks"] if isinstance(ranks, dict) else ranks
        check([r["parallel"] for r in ranks] == [COORDS[r] for r in range(4)],
              "sfctl ranks: %s" % [r.get("parallel") for r in ranks])
        st = sfd.status()
        check(st["rejected"]["parallel_invalid"] == 6 and st["rejected"]["parallel_conflict"] == 4,
              "counters: %s" % st["rejected"])
        text = sfd.sfctl("status").stdout.decode()
        check("parallel_invalid" in text and "parallel_conflict" in text, "status text: " + text)
        check(sfd.stop() == 0, "sfd did not stop cleanly")
    finally:
        for h in holders:
            h.kill()
            h.wait()
        sfd.close()


if __name__ == "__main__":
    main()
