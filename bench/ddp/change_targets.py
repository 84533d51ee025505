#!/usr/bin/python3
"""The change evaluation's three targets over every kept run
(docs/EVALUATION.md, "What changed against the baseline").

Each run of the change matrix at the default 100-step windows, pooled by
three, kept its jobs' recordings in bench/ddp/results/. This replays all of
them through one build's `sfctl replay` (a replay equals the live report,
docs/CHANGE.md) and prints, per run, per host and over all runs, with 95 %
Wilson intervals:

- top-1 of change.route at 0.1 of a step (target >= 90 %);
- top-2 of change.route at 0.05 (target >= 80 %);
- clean windows flagged: a route that is not empty in a fault-free job, or in
  a fault job's windows before its fault (target <= 5 %);

then the hit rates per fault kind. Fault windows are the full ones: those
whose pooled windows all carry the fault. A build's method change is judged
by running this before and after it. With --check it exits 1 unless every
target holds over all runs together (the CTest `bench_change_targets`).

  /usr/bin/python3 bench/ddp/change_targets.py --build build-rel [--check]
"""

import argparse
import concurrent.futures
import math
import os
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import change_matrix  # noqa: E402
import sfharness  # noqa: E402

RESULTS = os.path.join(HERE, "results")

# The hosts the runs ran on: the 4 ranks shared 2 cores, or each job had 5
# cores of its own (docs/EVALUATION.md, "What changed against the
# baseline").
SHARED, OWN = "2 shared cores", "16 cores, 5 a job"

# Each run: its name, the stem of its live tables (STEM_live.jsonl.gz and
# STEM_clean_live.jsonl.gz), the tarball of its recordings, the folders in it
# of the fault jobs' and the fault-free jobs' recordings, and its host.
RUNS = [
    ("run 10", "change_w100_run10", "change_w100_run10_recordings.tar.xz",
     "pool_faultrec", "pool_cleanrec", SHARED),
] + [
    ("run %d" % n, "change_w100_run%d" % n, tarball, "run%d" % n, "run%d_clean" % n, host)
    for n, tarball, host in ((11, "change_w100_run11to13_recordings.tar.xz", SHARED),
                             (12, "change_w100_run11to13_recordings.tar.xz", SHARED),
                             (13, "change_w100_run11to13_recordings.tar.xz", SHARED),
                             (14, "change_w100_run14to15_recordings.tar.xz", SHARED),
                             (15, "change_w100_run14to15_recordings.tar.xz", SHARED),
                             (16, "change_w100_run16_recordings.tar.xz", SHARED),
                             (17, "change_w100_run17_recordings.tar.xz", OWN))
]
TARGETS = (("top-1 at 0.1", 0.1, 1), ("top-2 at 0.05", 0.05, 2))
# The bars over all runs: at least this share hit, at most this flagged.
HIT_MIN = {"top-1 at 0.1": 0.90, "top-2 at 0.05": 0.80}
CLEAN_MAX = 0.05


def wilson(hits, n, z=1.96):
    """The 95 % Wilson score interval of hits/n (n > 0), in percent."""
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def fraction(hits, n):
    if n == 0:
        return "-"
    lo, hi = wilson(hits, n)
    return "%d/%d (%.1f %%, %.1f to %.1f)" % (hits, n, 100.0 * hits / n, lo, hi)


def live_records(stem, suffix):
    return change_matrix.load_records(os.path.join(RESULTS, stem + suffix + ".jsonl.gz"))


def plain_members(tar):
    """The tarball's files and folders, refusing any that would land outside
    the folder it is unpacked into (Debian 12's Python has no extract filter)."""
    for m in tar.getmembers():
        if os.path.isabs(m.name) or ".." in m.name.split("/") or not (m.isfile() or m.isdir()):
            raise ValueError("refusing tar member %r" % m.name)
        yield m


def replayed_run(build, run, pool, tmp):
    """The run's fault and fault-free jobs, replayed from their recordings."""
    _name, stem, tarball, fault_dir, clean_dir, _host = run
    unpacked = os.path.join(tmp, tarball)
    if not os.path.isdir(unpacked):
        with tarfile.open(os.path.join(RESULTS, tarball)) as t:
            t.extractall(unpacked, members=plain_members(t))
    jobs = [(r, os.path.join(unpacked, fault_dir)) for r in live_records(stem, "_live")]
    jobs += [(r, os.path.join(unpacked, clean_dir)) for r in live_records(stem, "_clean_live")]
    return list(pool.map(lambda job: change_matrix.replayed(build, *job), jobs))


class Tally(object):
    """Hits and windows of each target, per run, per fault kind and in all."""

    def __init__(self):
        self.counts = {}

    def add(self, key, hit):
        c = self.counts.setdefault(key, [0, 0])
        c[0] += bool(hit)
        c[1] += 1

    def get(self, key):
        return self.counts.get(key, [0, 0])

    def score(self, run, host, records):
        stages = {row: stage for _n, row, stage in change_matrix.KINDS}
        for rec in records:
            for w in change_matrix.scored_windows(rec, "clean"):
                for key in (("clean", run), ("clean", host), ("clean", None)):
                    self.add(key, w["change"]["route"])
            stage = stages[rec["row"]]
            if stage is None:
                continue
            for w in change_matrix.scored_windows(rec, "full"):
                groups = [change_matrix.group(x) for x in w["change"]["route"]]
                for target, mag, top in TARGETS:
                    if abs(rec["magnitude"] - mag) < 1e-9:
                        for key in ((target, run), (target, host), (target, None),
                                    (target, rec["row"])):
                            self.add(key, stage in groups[:top])


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", required=True, help="a build directory with sfctl")
    p.add_argument("--jobs", type=int, default=4, help="replays at once (default 4)")
    p.add_argument("--check", action="store_true",
                   help="exit 1 unless every target holds over all runs together")
    a = p.parse_args()
    build = sfharness.Build(a.build)
    tally = Tally()
    names = []
    hosts = []
    with tempfile.TemporaryDirectory() as tmp, \
            concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for run in RUNS:
            if not os.path.exists(os.path.join(RESULTS, run[2])):
                continue
            host = "all runs, " + run[5]
            tally.score(run[0], host, replayed_run(build, run, pool, tmp))
            names.append(run[0])
            hosts += [host] if host not in hosts else []
    columns = [t for t, _m, _k in TARGETS] + ["clean windows flagged"]
    keys = [t for t, _m, _k in TARGETS] + ["clean"]
    print("| run | %s |" % " | ".join(columns))
    print("|---|" + "---|" * len(columns))
    for run in names + hosts + [None]:
        print("| %s | %s |" % (run or "**all runs**",
                               " | ".join(fraction(*tally.get((k, run))) for k in keys)))
    print()
    print("| fault kind | %s |" % " | ".join(t for t, _m, _k in TARGETS))
    print("|---|" + "---|" * len(TARGETS))
    for kind, row, stage in change_matrix.KINDS:
        if stage is not None:
            print("| %s | %s |" % (kind, " | ".join(
                "%d/%d" % tuple(tally.get((t, row))) for t, _m, _k in TARGETS)))
    return 1 if a.check and missed(tally) else 0


def missed(tally):
    """The targets missed over all runs, each printed."""
    misses = [t for t, least in HIT_MIN.items() if share(tally.get((t, None))) < least]
    if share(tally.get(("clean", None))) > CLEAN_MAX:
        misses.append("clean windows flagged")
    for t in misses:
        print("target missed over all runs: %s" % t)
    return misses


def share(counts):
    hits, n = counts
    return hits / n if n else float("nan")


if __name__ == "__main__":
    sys.exit(main())
