"""One local user against the others, on a real sfd: idle ingest connections
that never say hello, idle query connections, and large answers that are
asked for and never read. Each attack runs as another uid (setpriv with a
numeric uid, no passwd entry). Meanwhile a third user's trainer must connect
and root's STATUS must answer within 1 s, and sfd must close the attacker's
connections by its caps and timeouts, naming the attacker in its log."""

import json
import re
import time

import attacks
from sfdtest import Sfd, check, send, vm_rss_kb, wait_for

ATTACKER, VICTIM = 4242, 4343
CONF = """[limits]
max_connections = 256
max_connections_per_uid = 64
max_query_connections_per_uid = 4
hello_timeout_ms = 600
query_idle_timeout_ms = 4000
keep_windows = 2000
[gates]
warmup_steps = 0
window_steps = 10
"""


def status_latency(sfd):
    """Root's STATUS through a fresh connection: (seconds, parsed answer)."""
    t0 = time.monotonic()
    st, err, body = attacks.ask(sfd.query, "status", timeout=5)
    check(st == 0, "root's STATUS failed: %d %s" % (st, err))
    return time.monotonic() - t0, json.loads(body)


def rejected(sfd, reason):
    return status_latency(sfd)[1]["rejected"][reason]


def victim_trains(sfd, job):
    """Another user's trainer connects, says hello and sends its steps."""
    t0 = time.monotonic()
    rc, out, p = send(sfd, user=str(VICTIM), job=job, rank=0, world=1, steps=20)
    took = time.monotonic() - t0
    check(rc == 0 and out.get("sent") == "20", "victim trainer failed: %s %s"
          % (out, p.stderr.decode()))
    # Exec and connect under sanitizers: the bound is loose, the lockout it
    # guards against is forever.
    check(took < 2.0, "victim trainer took %.2f s" % took)
    wait_for(lambda: sfd.jobs().get(job, {}).get("records") == 20, "victim's records")


def probe_loop(sfd, seconds):
    """STATUS again and again for a while: the loop never stalls 1 s."""
    worst, end = 0.0, time.monotonic() + seconds
    while time.monotonic() < end:
        worst = max(worst, status_latency(sfd)[0])
        time.sleep(0.02)
    check(worst < 1.0, "STATUS took %.2f s under attack" % worst)
    return worst


def idle_ingest(sfd):
    """Finding 3: idle ingest connections with no hello locked trainers out."""
    before_cap, before_to = rejected(sfd, "uid_connections"), rejected(sfd, "hello_timeout")
    a = attacks.Attack(ATTACKER, "idle-ingest", sfd.ingest, count=300, once=True)
    wait_for(lambda: rejected(sfd, "uid_connections") == before_cap + 236,
             "the per-uid cap to refuse 236 of 300")
    victim_trains(sfd, "victim-ingest")
    probe_loop(sfd, 0.3)
    wait_for(lambda: rejected(sfd, "hello_timeout") == before_to + 64,
             "the hello timeout to close the 64 admitted")
    seen = a.end()
    check(seen["held"] == 0 and seen["closed_by_sfd"] == 300, "attacker saw %s" % seen)
    log = sfd.logtext()
    check(re.search(r"rejected \(uid_connections\) from pid %d uid %d" % (a.pid, ATTACKER), log),
          "the refusal does not name the attacker")
    check(re.search(r"rejected \(hello_timeout\) from pid %d uid %d" % (a.pid, ATTACKER), log),
          "the hello timeout does not name the attacker")
    check("pid -1 uid 0" not in log, "a rejection without its peer")


def idle_query(sfd):
    """Finding 3: idle query connections made root's `sfctl status` fail."""
    before_max, before_to = rejected(sfd, "max_connections"), rejected(sfd, "query_timeout")
    before_cap = rejected(sfd, "uid_connections")
    # Twelve users with four idle connections each fill the 48 shared slots.
    crowd = [attacks.Attack(5000 + i, "idle-query", sfd.query, wait=False, count=4, once=True)
             for i in range(12)]
    for a in crowd:
        a.ready()
    wait_for(lambda: status_latency(sfd)[1]["query_connections"] == 49, "48 idle + root")
    extra = attacks.Attack(5012, "idle-query", sfd.query, count=6, once=True)
    wait_for(lambda: rejected(sfd, "max_connections") == before_max + 6,
             "a 13th user to find no shared slot")
    check(rejected(sfd, "uid_connections") == before_cap, "no per-uid refusal expected")
    took, _ = status_latency(sfd)           # a reserved slot
    check(took < 1.0, "root's STATUS took %.2f s" % took)
    sfd.sfctl("status")                     # and the real CLI
    wait_for(lambda: rejected(sfd, "query_timeout") == before_to + 48, "idle clients closed")
    # One user alone is held to its own share.
    one = attacks.Attack(5013, "idle-query", sfd.query, count=6, once=True)
    wait_for(lambda: rejected(sfd, "uid_connections") == before_cap + 2, "5013 capped at 4")
    wait_for(lambda: rejected(sfd, "query_timeout") == before_to + 52, "5013's four closed")
    for a in crowd + [extra, one]:
        check(a.end()["held"] == 0, "an idle query connection survived")


def unread_answers(sfd, kind, job):
    """Finding 1: large answers asked for and never read were built whole,
    held without a timeout, and stalled the loop."""
    pid = sfd.pid()
    before_to = rejected(sfd, "query_timeout")
    rss0 = vm_rss_kb(pid)
    a = attacks.Attack(ATTACKER, "unread-answer", sfd.query, count=4, kind=kind, job=job,
                       once=True)
    worst = probe_loop(sfd, 0.5)
    grew = (vm_rss_kb(pid) - rss0) / 1024
    check(grew < 24, "%s: RSS grew %.1f MB for four unread answers" % (kind, grew))
    victim_trains(sfd, "victim-" + kind)
    wait_for(lambda: rejected(sfd, "query_timeout") == before_to + 4, "unread readers closed")
    check(a.end()["closed_by_sfd"] == 4, "unread answers not closed")
    return worst, grew


def main():
    sfd = Sfd(CONF)
    try:
        idle_ingest(sfd)
        idle_query(sfd)

        # The attacker's own jobs: one declares 2^18 ranks (a RANKS answer of
        # about 27 MB), the other keeps 12000 rows (a RECORD of about 3 MB).
        rc, _, p = send(sfd, user=str(ATTACKER), job="wide", rank=0, world=262144, steps=3)
        check(rc == 0, "wide job: " + p.stderr.decode())
        rc, _, p = send(sfd, user=str(ATTACKER), job="long", rank=0, world=1, steps=12000,
                        batch=64, step_us=100)
        check(rc == 0, "long job: " + p.stderr.decode())
        wait_for(lambda: sfd.jobs()["long"]["open_windows"] == 0, "long job's windows")
        long_job = sfd.jobs()["long"]
        check(long_job["records"] > 6000, "long job too short: %s" % long_job)

        unread_answers(sfd, "ranks", "wide")
        unread_answers(sfd, "record", "long")

        # A reader that does read gets every byte, as before streaming.
        st, err, body = attacks.ask(sfd.query, "ranks", "wide")
        check(st == 0, "RANKS: " + err)
        ranks = json.loads(body)
        check(ranks["world_size"] == 262144 and len(ranks["ranks"]) == 262144 and
              ranks["ranks"][-1]["rank"] == 262143, "RANKS answer incomplete")
        st, err, body = attacks.ask(sfd.query, "record", "long")
        check(st == 0, "RECORD: " + err)
        lines = body.decode().splitlines()
        # the header, the baseline line once the job has one, rows, window lines
        reference = sum('"type":"reference"' in line for line in lines)
        check(reference <= 1, "RECORD has %d reference lines" % reference)
        want = 1 + reference + long_job["records"] + long_job["windows"]
        check(len(lines) == want, "RECORD has %d lines, want %d" % (len(lines), want))
        check(json.loads(lines[0])["type"] == "header" and
              json.loads(lines[-1])["type"] == "window", "RECORD is not a whole recording")
        check(sfd.stop() == 0, "sfd did not stop cleanly")
    finally:
        sfd.close()


if __name__ == "__main__":
    main()
