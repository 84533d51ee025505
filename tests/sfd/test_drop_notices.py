"""Finding 7 of issue 11: one rank's drop notice cannot wedge its job. A batch
claiming 10^6 drops over steps up to 10^9 opens no far-future windows: every
real window still closes complete and no record is refused. Drop totals are
bounded by the steps the job has sent plus one window, and a total of 2^64-1
neither wraps nor shows negative."""

import json
import subprocess

from sfdtest import Sfd, check, sender_args, wait_for

CONF = """[sfd]
window_grace_ms = 2000
[gates]
warmup_steps = 0
window_steps = 10
"""
STEPS = 100


def job(sfd, name):
    return sfd.jobs()[name]


def run(sfd, name, notice):
    """Rank 0 sends the hostile notice with its first batch; both ranks then
    send STEPS steps."""
    procs = []
    for r in range(2):
        kw = dict(job=name, rank=r, world=2, steps=STEPS, batch=10)
        if r == 0:
            kw.update(notice)
        procs.append(subprocess.Popen(sender_args(sfd, **kw), stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE))
    for p in procs:
        out, err = p.communicate(timeout=60)
        check(p.returncode == 0 and b"sent=%d" % STEPS in out, "sender: %s %s" % (out, err))
    wait_for(lambda: job(sfd, name)["windows"] == STEPS // 10, "windows of " + name)
    wait_for(lambda: job(sfd, name)["open_windows"] == 0, "open windows of " + name)
    return job(sfd, name)


def main():
    sfd = Sfd(CONF)
    try:
        # At most the steps up to one window past the job's highest, less those
        # the rank delivered. Rank 0's notice rides on its first batch (10
        # records), when rank 1 may have shown every step: 99 + 10 + 1 - 10.
        bound = STEPS
        j = run(sfd, "wedge", dict(drop_total=10**6, drop_first=0, drop_last=10**9))
        check(j["records"] == 2 * STEPS and j["rejected"] == 0, "records refused: %s" % j)
        check(sfd.rejected("pending_full") == 0, "pending_full: %s" % sfd.status()["rejected"])
        check(0 < j["dropped"] <= bound, "drop total not bounded: %s" % j["dropped"])
        reports = json.loads(sfd.sfctl("report", "wedge", "--last", "10", "--json").stdout)
        check([r["window"]["index"] for r in reports] == list(range(10)),
              "real windows lost: %s" % [r["window"]["index"] for r in reports])
        check(sum(r["window"].get("dropped_records", 0) for r in reports) <= bound,
              "drops attributed past the bound")

        j = run(sfd, "wrap", dict(drop_total=2**64 - 1))
        check(0 < j["dropped"] <= bound, "2^64-1 drops shown as %s" % j["dropped"])
        st = sfd.status()
        check(0 <= st["dropped"] <= 2 * bound, "daemon dropped counter: %s" % st["dropped"])
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
