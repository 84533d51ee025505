"""Durable history across restarts of the real sfd: after a SIGTERM restart
the last N windows answer the same bytes (JSON and text, whole and one by
one), the job keeps its owner (another uid is still denied), the Prometheus
lines of its latest window come back, and the job continues where it was.
After a SIGKILL, every report the store had committed comes back too."""

import json
import os
import signal

from sfdtest import Sfd, check, fail, run_job, send, wait_for

OWNER = "4242"      # numeric: no passwd entry needed
OTHER = "4343"
WINDOWS = 5
CONF = """[sfd]
window_grace_ms = 300
prom_dir = %s
[limits]
keep_windows = 8
[gates]
warmup_steps = 0
window_steps = 10
"""


def answers(sfd, job, n):
    """Every form of the report answer of the last n windows, as bytes."""
    out = {
        "json": sfd.sfctl("report", job, "--last", str(n), "--json", user=OWNER).stdout,
        "text": sfd.sfctl("report", job, "--last", str(n), user=OWNER).stdout,
        "root": sfd.sfctl("report", job, "--last", str(n), "--json").stdout,
    }
    for w in range(n):
        out["w%d" % w] = sfd.sfctl("report", job, "--window", str(w), "--json",
                                   user=OWNER).stdout
    return out


def prom_lines(path, job):
    """The export's lines of one job, without its cumulative counters (they
    restart from zero with the process, as Prometheus counters do) and the
    time its latest report was ready (the store does not keep it: a restored
    window has none until the next one closes), nor what the ranks' hellos
    said (rank_info: gone with the process, like the ranks' last-seen times)."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        lines = [x for x in f.read().splitlines() if 'job_id="%s"' % job in x]
    return sorted(x for x in lines if "_total{" not in x and "_timestamp_seconds{" not in x and
                  not x.startswith("stagefrontier_rank_info{"))


def history(sfd):
    return sfd.status()["history"]


def main():
    sfd = Sfd("", start=False)
    prom = os.path.join(sfd.dir, "prom")
    os.mkdir(prom)
    path = os.path.join(prom, "stagefrontier.prom")
    with open(sfd.conf, "w") as f:
        f.write(CONF % prom)
    try:
        sfd.start()
        check(history(sfd)["enabled"], "history is on with a usable state dir")
        for r in range(2):
            rc, _, p = send(sfd, user=OWNER, job="h1", rank=r, world=2, steps=WINDOWS * 10,
                            slow_rank=1, slow_stage=2, slow_ns=2000000)
            check(rc == 0, "sender: %s" % p.stderr.decode())
        wait_for(lambda: sfd.jobs().get("h1", {}).get("windows") == WINDOWS, "five windows")
        wait_for(lambda: history(sfd)["written"] >= WINDOWS, "the reports written")
        before = answers(sfd, "h1", WINDOWS)
        def exported_last():
            lines = prom_lines(path, "h1") or []
            return lines if any("window_index" in x and x.endswith(" %d" % (WINDOWS - 1))
                                for x in lines) else None

        prom_before = wait_for(exported_last, "the export of the last window")
        mode = os.stat(os.path.join(sfd.state, "history.sqlite")).st_mode
        check(mode & 0o077 == 0, "the store is private to sfd's user: %o" % mode)
        uid_before = sfd.jobs()["h1"]["uid"]
        check(uid_before == int(OWNER), "owner uid %s" % uid_before)

        check(sfd.stop() == 0, "sfd did not exit cleanly")
        # a clean stop removes the file: the lines must come back from the restored state
        check(not os.path.exists(path), "the export outlived a clean stop")
        sfd.start()
        h = history(sfd)
        check(h["restored"] == WINDOWS and h["restore_errors"] == 0, "restored: %s" % h)
        after = answers(sfd, "h1", WINDOWS)
        for k in before:
            if before[k] != after[k]:
                fail("%s answer differs after the restart:\n%s\n---\n%s"
                     % (k, before[k].decode()[:400], after[k].decode()[:400]))
        check(len(json.loads(after["json"])) == WINDOWS, "last %d windows" % WINDOWS)
        job = sfd.jobs()["h1"]
        check(job["uid"] == int(OWNER) and job["segment"] == 0, "restored job: %s" % job)
        # The owner's access rule holds: another uid naming the owner's job is
        # still denied, and a bare id names only the caller's own (none here).
        sfd.sfctl("report", OWNER + "/h1", user=OTHER, check_rc=6)
        sfd.sfctl("report", "h1", user=OTHER, check_rc=5)
        check(json.loads(sfd.sfctl("jobs", "--json", user=OTHER).stdout) == [],
              "another uid sees no restored job")
        wait_for(lambda: prom_lines(path, "h1") == prom_before, "the same export lines")

        # The job's ranks reconnect and go on: its next windows follow the
        # restored ones (a new launch would be a new incarnation).
        for r in range(2):
            rc, _, p = send(sfd, user=OWNER, job="h1", rank=r, world=2, steps=20,
                            start=WINDOWS * 10, generation=1)
            check(rc == 0, "sender after restart: %s" % p.stderr.decode())
        wait_for(lambda: sfd.jobs()["h1"]["latest_window"] == WINDOWS + 1, "windows 5 and 6")
        full = json.loads(sfd.sfctl("report", "h1", "--last", str(WINDOWS + 2), "--json").stdout)
        check([w["window"]["index"] for w in full] == list(range(WINDOWS + 2)),
              "restored and new windows in order: %s" % [w["window"]["index"] for w in full])
        check(json.loads(before["json"]) == full[:WINDOWS], "restored windows unchanged")

        # SIGKILL: whatever the store committed comes back, nothing else is needed.
        wait_for(lambda: history(sfd)["written"] >= 2, "the new reports written")
        last = sfd.sfctl("report", "h1", "--last", "7", "--json").stdout
        sfd.proc.send_signal(signal.SIGKILL)
        sfd.proc.wait()
        sfd.start()
        check(sfd.sfctl("report", "h1", "--last", "7", "--json").stdout == last,
              "the last 7 windows after a SIGKILL")
        check(sfd.stop() == 0, "sfd did not exit cleanly")
    finally:
        sfd.close()
    print("ok")


main()
