"""The live report of a job equals `sfctl replay` of its `sfctl record` dump,
byte for byte, for clean windows and for windows downgraded by drops,
contract violations and a deadline cut-off."""

import json
import os

from sfdtest import Sfd, check, live_equals_replay, run_job, wait_for

CONF = """[sfd]
window_grace_ms = 1500
[gates]
warmup_steps = 2
window_steps = 10
"""


def live_vs_replay(sfd, job, n_windows):
    wait_for(lambda: sfd.jobs().get(job, {}).get("windows") == n_windows,
             "%d closed windows of %s" % (n_windows, job))
    live = live_equals_replay(sfd, job)
    windows = json.loads(live)
    check(len(windows) == n_windows, "%d windows, want %d" % (len(windows), n_windows))
    return windows


def reasons(w):
    return set(w["downgrade_reasons"])


def main():
    sfd = Sfd(CONF)
    try:
        # Clean: 4 ranks, rank 2 slow in data.next_wait; 3 complete windows.
        run_job(sfd, "clean", 4, 32, extra={2: dict(slow_rank=2, slow_stage=0,
                                                       slow_ns=4000000)})
        ws = live_vs_replay(sfd, "clean", 3)
        for w in ws:
            check(w["routing_set"][0] == "data.next_wait", "route: %s" % w["routing_set"])
            check(w["window"]["missing_ranks"] == 0, "clean window has missing ranks")
            check(not ({"dropped_records", "contract_violations", "incomplete_steps"}
                       & reasons(w)), "clean window downgraded: %s" % reasons(w))

        # Downgraded: a violation in window 0, a reported drop in window 1,
        # rank 3 never sends step 25, so window 2 closes at its deadline.
        extra = {1: dict(violation_step=5, fake_drop_step=15), 3: dict(skip_step=25)}
        run_job(sfd, "dg", 4, 42, extra=extra)
        ws = live_vs_replay(sfd, "dg", 4)
        by = {w["window"]["index"]: w for w in ws}
        check("contract_violations" in reasons(by[0]), "window 0: %s" % reasons(by[0]))
        check("dropped_records" in reasons(by[1]), "window 1: %s" % reasons(by[1]))
        check(by[2]["window"]["incomplete_steps"] == 1,
              "window 2 incomplete steps: %s" % by[2]["window"])
        check("incomplete_steps" in reasons(by[2]), "window 2: %s" % reasons(by[2]))
        check(not reasons(by[3]) & {"dropped_records", "contract_violations",
                                    "incomplete_steps"}, "window 3: %s" % reasons(by[3]))
        # Many kept windows: the record and report answers span many 48 KiB
        # chunks and more than a socket buffer, so sfd must resume sending as
        # the reader drains.
        run_job(sfd, "big", 24, 202, batch=64)
        ws = live_vs_replay(sfd, "big", 16)
        check([w["window"]["index"] for w in ws] == list(range(4, 20)), "kept windows")
        rec = os.path.join(sfd.dir, "big.jsonl")
        check(os.path.getsize(rec) > 256 * 1024, "record spans many chunks")

        check(sfd.stop() == 0, "sfd did not exit cleanly")
        check("loop closed with live handles" not in sfd.logtext(), "handles leaked")
    finally:
        sfd.close()
    print("ok")


main()
