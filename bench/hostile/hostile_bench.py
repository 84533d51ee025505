#!/usr/bin/python3
"""What one hostile local user costs everyone else on a node. For each
scenario a fresh sfd is started, the attacker's own setup is run (its jobs),
then, with the attack in place, another uid's STATUS latency, another uid's
trainer connect time and sfd's RSS are measured. The scenario `none` (no
attack) is the anchor, measured in the same run. Run as root (it switches
uids with setpriv); see docs/OPERATIONS.md for figures.

    /usr/bin/python3 bench/hostile/hostile_bench.py --build build [--seconds 3]
        [--scenario idle-ingest --scenario unread-ranks ...]

Adding a scenario: a function (sfd) -> None that prepares the attacker's
state, plus the tests/sfd/attacks.py scenario that attacks, in SCENARIOS.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "sfd"))

ATTACKER, PROBE, TRAINER = 7000, 7001, 7002
CONF = """[limits]
keep_windows = 128
[gates]
warmup_steps = 0
window_steps = 1000
"""


def no_setup(sfd):
    pass


def wide_job(sfd):
    """The attacker's job declaring 2^18 ranks: a RANKS answer of ~27 MB."""
    import sfdtest
    rc, _, p = sfdtest.send(sfd, user=str(ATTACKER), job="wide", rank=0, world=262144,
                            steps=3)
    if rc != 0:
        sys.exit("wide job: " + p.stderr.decode())


def long_job(sfd):
    """The attacker's job keeping 100,000 rows: a RECORD of ~25 MB."""
    import sfdtest
    rc, _, p = sfdtest.send(sfd, user=str(ATTACKER), job="long", rank=0, world=1,
                            steps=100000, batch=256, step_us=5)
    if rc != 0:
        sys.exit("long job: " + p.stderr.decode())
    sfdtest.wait_for(lambda: sfd.jobs()["long"]["open_windows"] == 0, "long job closed")


# name: (setup, attacks.py scenario or None, its socket, its arguments)
SCENARIOS = {
    "none": (no_setup, None, None, {}),
    "idle-ingest": (no_setup, "idle-ingest", "ingest", {"count": 4096}),
    "idle-query": (no_setup, "idle-query", "query", {"count": 64}),
    "unread-ranks": (wide_job, "unread-answer", "query",
                     {"count": 40, "kind": "ranks", "job": "wide"}),
    "unread-record": (long_job, "unread-answer", "query",
                      {"count": 6, "kind": "record", "job": "long"}),
}


def trainer_connect_ms(sfd, runs):
    """Wall time of a one-step trainer of another uid: connect, hello, send."""
    import sfdtest
    times = []
    for i in range(runs):
        t0 = time.monotonic()
        rc, out, _ = sfdtest.send(sfd, user=str(TRAINER), job="t%d" % i, rank=0, world=1,
                                  steps=1)
        ms = 1000 * (time.monotonic() - t0)
        times.append(ms if rc == 0 and out.get("sent") == "1" else float("inf"))
    return statistics.median(times), max(times)


def vm_kb(pid, key):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


def run(name, seconds, runs):
    import attacks
    import sfdtest
    setup, scenario, sock, kw = SCENARIOS[name]
    sfd = sfdtest.Sfd(CONF)
    try:
        setup(sfd)
        rss_before = vm_kb(sfd.pid(), "VmRSS")
        attack = None
        if scenario is not None:
            path = sfd.ingest if sock == "ingest" else sfd.query
            attack = attacks.Attack(ATTACKER, scenario, path, **kw)
        probe = attacks.Attack(PROBE, "probe-status", sfd.query, interval_ms=20)
        t_med, t_max = trainer_connect_ms(sfd, runs)
        time.sleep(max(0.0, seconds - (t_med * runs) / 1000))   # the attack's duration
        lat = probe.end(timeout=120)
        seen = attack.end(timeout=120) if attack else {}
        st = sfd.status()
        row = {"scenario": name, "status_p50_ms": lat["p50_ms"], "status_max_ms": lat["max_ms"],
               "status_failed": lat["failed"], "trainer_ms_median": t_med,
               "trainer_ms_max": t_max, "rss_before_mb": rss_before / 1024,
               "rss_peak_mb": vm_kb(sfd.pid(), "VmHWM") / 1024,
               "attacker_opened": seen.get("opened"), "closed_by_sfd": seen.get("closed_by_sfd"),
               "rejected": {k: v for k, v in st["rejected"].items() if v}}
        sfd.stop()
        return row
    finally:
        sfd.close()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--seconds", type=float, default=3.0, help="each attack's duration")
    ap.add_argument("--runs", type=int, default=5, help="trainer connects per scenario")
    ap.add_argument("--scenario", action="append", choices=sorted(SCENARIOS))
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    build = os.path.abspath(args.build)
    os.environ.setdefault("SFD", os.path.join(build, "daemon/sfd/sfd"))
    os.environ.setdefault("SFCTL", os.path.join(build, "daemon/sfctl/sfctl"))
    os.environ.setdefault("SF_TEST_SENDER", os.path.join(build, "tests/sfd/sf_test_sender"))
    names = args.scenario or list(SCENARIOS)
    if "none" not in names:
        names.insert(0, "none")     # the anchor always runs
    rows = [run(n, args.seconds, args.runs) for n in names]
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("%-14s %9s %9s %6s %11s %11s %9s %9s  %s" % (
        "scenario", "status50", "statusmax", "failed", "trainer50", "trainermax", "rss0 MB",
        "peak MB", "rejected"))
    for r in rows:
        print("%-14s %9.1f %9.1f %6d %11.1f %11.1f %9.1f %9.1f  %s" % (
            r["scenario"], r["status_p50_ms"], r["status_max_ms"], r["status_failed"],
            r["trainer_ms_median"], r["trainer_ms_max"], r["rss_before_mb"], r["rss_peak_mb"],
            " ".join("%s=%d" % kv for kv in r["rejected"].items())))


if __name__ == "__main__":
    main()
