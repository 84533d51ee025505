#!/usr/bin/python3
"""The change evaluation (docs/EVALUATION.md, docs/CHANGE.md): a real 4-rank
DDP job (Gloo) per (fault, magnitude, seed) against a real sfd, the fault
switched on only after the baseline windows. Scores the live report's
`change` object: top-1 and top-2 of change.route, the hidden rank first in
change.suspect_ranks, and clean windows flagged. Prints markdown tables.

Owns the plan and the scoring of the change; jobs run through sfharness.py.
Raw windows go to --out (JSON Lines); --tables-from rebuilds the tables.

  /usr/bin/python3 bench/ddp/change_matrix.py --build build-eval --out change.jsonl
  /usr/bin/python3 bench/ddp/change_matrix.py --build build-eval --only-none --none-runs 3 \
      --none-windows 7 --out change.jsonl     # more clean windows
  /usr/bin/python3 bench/ddp/change_matrix.py --build build-eval --jobs 3 --cpus-per-job 5 \
      --out change.jsonl      # three jobs at once, each on five cores of its own
  /usr/bin/python3 bench/ddp/change_matrix.py --tables-from bench/ddp/results/change.jsonl.gz
  /usr/bin/python3 bench/ddp/change_matrix.py --build build-eval --tables-from change.jsonl \
      --replay-from records/   # the same jobs' rows through this build's `sfctl replay`
  /usr/bin/python3 bench/ddp/change_matrix.py --build build-eval --tables-from change.jsonl \
      --replay-from records/ --rewindow 100 --pool 1   # the same rows in 100-step windows

A route entry counts for its reporting group: a ".sync_wait" stage is its
stage's group (a slower collective is a change of that stage's group).
"""

import argparse
import concurrent.futures
import gzip
import json
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import faults  # noqa: E402
import sfharness  # noqa: E402
import queue  # noqa: E402
import subprocess  # noqa: E402
import threading  # noqa: E402

SYNC_WAIT = ".sync_wait"


def group(stage):
    """The reporting group of an ordered stage (docs/ACCOUNTING.md)."""
    return stage[:-len(SYNC_WAIT)] if stage.endswith(SYNC_WAIT) else stage

# Issue's fault kinds -> train.py rows and the stage where the delay first
# becomes group-visible. The host-only callback is a control: the other ranks
# absorb its delay as wait in the next step's forward or backward, which
# comes before the callbacks boundary in step-relative time, so the change
# must not route callbacks.cpu_wall first (faults.CONTROL_STAGE).
KINDS = [
    ("data", "data_wait", "data.next_wait"),
    ("forward", "forward_host", "model.fwd_loss_cpu_wall"),
    ("backward-compute", "backward_compute", "model.backward_cpu_wall"),
    ("communication", "backward_comm", "model.backward_cpu_wall"),
    ("callback barrier", "callback_barrier", "callbacks.cpu_wall"),
    ("host-only callback (control)", "callback_host", None),
    ("none", "none", None),
]
MAGNITUDES = [0.05, 0.1, 0.25]
BASELINE = 3     # windows before the fault (the default baseline_windows)
FAULTY = 2       # windows with the fault on (--faulty)


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def run(build, row, mag, seed, window, warmup, faulty=FAULTY, record_dir=None, clean_before=0,
        arrivals="on", cpus=None):
    job = "chg-%s-%s-%d-%d" % (row, mag, seed, os.getpid())
    phases = "A" * (BASELINE + clean_before) + "B" * faulty
    with sfharness.Sfd(build, warmup_steps=warmup, window_steps=window, cpus=cpus) as sfd:
        res = sfharness.train(build, job, ["--ranks", "4", "--fault", row, "--seed", str(seed),
                                           "--magnitude", str(mag), "--warmup", str(warmup),
                                           "--steps", str(window * len(phases)), "--phases",
                                           phases, "--arrivals", arrivals],
                              sf_socket=sfd.ingest, timeout=600, cpus=cpus)
        wins = sfd.windows(job, len(phases), timeout=120)
        if record_dir:
            # The job's rows and baseline, for `sfctl replay` of the same
            # windows (a replay equals the live report).
            os.makedirs(record_dir, exist_ok=True)
            r = sfd.sfctl("record", job, "-o", os.path.join(record_dir, job + ".jsonl"))
            if r.returncode != 0:
                raise RuntimeError("sfctl record %s: %s" % (job, r.stderr.strip()))
    keep = [keep_window(w) for w in wins]
    return {"row": row, "magnitude": mag, "seed": seed, "job": job,
            "hidden_rank": res["hidden_rank"],
            "delay_s": res["delay_s"], "median_step_s": res["median_step_s"],
            "fault_from": BASELINE + clean_before, "windows": keep}


def keep_window(w):
    return {"index": w["window"]["index"], "change": w.get("change"),
            "whatif": {k: (w.get("whatif") or {}).get(k)
                       for k in ("slowdown", "waste_rank_s", "basis", "lower_bound")},
            "routing_set": w.get("routing_set"),
            "downgrades": w.get("downgrade_reasons")}


def rewindowed(path, steps, pool, tmp):
    """The recording's rows alone (no window or reference lines, so replay
    cuts windows of `steps`), its header's window length, and a gates file
    pooling `pool` windows, all under tmp."""
    rows = os.path.join(tmp, os.path.basename(path))
    window = None
    with open(path) as src, open(rows, "w") as dst:
        for line in src:
            kind = json.loads(line)["type"]
            if kind == "header":
                window = json.loads(line)["gates"]["window_steps"]
            if kind not in ("window", "reference"):
                dst.write(line)
    gates = os.path.join(tmp, "pool.ini")
    with open(gates, "w") as f:
        f.write("change_pool_windows = %d\n" % pool)
    return rows, window, ["--window-steps", str(steps), "--gates", gates]


def replayed(build, rec, record_dir, steps=None, pool=None):
    """rec with its windows recomputed by `sfctl replay` of the job's
    recording, the baseline rebuilt from the recording's first windows;
    with steps, cut into windows of that many steps and pooled by `pool`
    (the fault then starts at the same step, in the new windows' units)."""
    path = os.path.join(record_dir, rec["job"] + ".jsonl")
    out = dict(rec)
    with tempfile.TemporaryDirectory() as tmp:
        extra = []
        if steps:
            path, window, extra = rewindowed(path, steps, pool, tmp)
            out["fault_from"] = rec.get("fault_from", BASELINE) * window // steps
        r = subprocess.run([build.sfctl, "replay", "--json", "--baseline-windows", str(BASELINE)] +
                           extra + [path], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, timeout=300)
    if r.returncode != 0:
        raise RuntimeError("sfctl replay %s: %s" % (path, r.stderr.strip()))
    out["windows"] = [keep_window(w) for w in json.loads(r.stdout)]
    return out


def onset(rec, w):
    """Whether the window's change pools a window from before the fault
    (docs/CHANGE.md, "Pooled windows"): the fault is then diluted."""
    measured = (w["change"].get("measured") or {}).get("windows", [w["index"]])
    return min(measured) < rec.get("fault_from", BASELINE)


def scored_windows(rec, phase="all"):
    """The windows after the baseline with the fault on ("all"; "full": those
    whose pooled windows all have it, "onset": the others), or without it
    ("clean": a fault job's windows before its fault, a clean job's all)."""
    fault_from = rec.get("fault_from", BASELINE) if rec["row"] != "none" else 1 << 62
    for w in rec["windows"]:
        if w["index"] < BASELINE or w["change"] is None:
            continue
        if w["index"] < fault_from:
            kind = "clean"
        else:
            kind = "onset" if onset(rec, w) else "full"
        if phase == kind or (phase == "all" and kind != "clean"):
            yield w


def pct(a, b):
    return "%d/%d (%.0f %%)" % (a, b, 100.0 * a / b) if b else "-"


def tables(records, phase="all"):
    out = []
    out.append("| fault kind | magnitude | windows | top-1 route | top-2 route | "
               "hidden rank first suspect | median slowdown | right stage first, of routed |")
    out.append("|---|---|---|---|---|---|---|---|")
    clean_flagged = clean_total = 0
    for name, row, stage in KINDS:
        for mag in MAGNITUDES:
            recs = [r for r in records if r["row"] == row and
                    (row == "none" or abs(r["magnitude"] - mag) < 1e-9)]
            if row == "none" and mag != MAGNITUDES[0]:
                continue
            n = t1 = t2 = sus = routed = 0
            slow = []
            for r in recs:
                for w in scored_windows(r, "clean" if row == "none" else phase):
                    c = w["change"]
                    n += 1
                    slow.append(c["slowdown"])
                    if stage is None:
                        if row == "none":
                            clean_total += 1
                            clean_flagged += bool(c["route"])
                        continue
                    groups = [group(x) for x in c["route"]]
                    t1 += groups[:1] == [stage]
                    routed += bool(c["route"])
                    t2 += stage in groups[:2]
                    sus += bool(c["suspect_ranks"]) and \
                        c["suspect_ranks"][0]["rank"] == r["hidden_rank"]
            slow.sort()
            med = "%.3f" % slow[len(slow) // 2] if slow else "-"
            control = faults.CONTROL_STAGE.get(row)
            if control is not None:
                wins = [w["change"]["route"] for r in recs for w in scored_windows(r, phase)]
                out.append("| %s | %.2f | %d | flagged: %s | %s first: %s | | %s | |" %
                           (name, mag, n, pct(sum(bool(rt) for rt in wins), n), control,
                            pct(sum([group(x) for x in rt[:1]] == [control] for rt in wins), n),
                            med))
            elif stage is None:
                out.append("| %s | - | %d | flagged: %s | | | %s | |" %
                           (name, n, pct(sum(bool(w["change"]["route"]) for r in recs
                                             for w in scored_windows(r, "clean")), n), med))
            else:
                out.append("| %s | %.2f | %d | %s | %s | %s | %s | %s |" %
                           (name, mag, n, pct(t1, n), pct(t2, n), pct(sus, n), med,
                            pct(t1, routed)))
    out.append("")
    before = [w["change"]["route"] for r in records if r["row"] != "none"
              for w in scored_windows(r, "clean")]
    out.append("Clean windows flagged (route not empty, no fault): %s in fault-free jobs" %
               pct(clean_flagged, clean_total) +
               ("; %s in fault jobs before the fault" % pct(sum(map(bool, before)), len(before))
                if before else ""))
    return "\n".join(out)


def all_tables(records):
    """Every window; then, when a change pooled windows from before the
    fault, the windows wholly after it and those at its onset apart."""
    if not any(onset(r, w) for r in records for w in scored_windows(r)):
        return tables(records)
    return "\n\n".join("### %s\n\n%s" % (title, tables(records, phase)) for title, phase in
                       (("Every window after the baseline", "all"),
                        ("Windows whose pooled windows all have the fault", "full"),
                        ("Onset: windows that pool windows from before the fault", "onset")))


def load_records(path):
    """The job records of a run's JSON Lines file (gzipped or not)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build")
    p.add_argument("--out")
    p.add_argument("--tables-from")
    p.add_argument("--record-dir", help="keep each job's `sfctl record` here")
    p.add_argument("--replay-from", metavar="DIR",
                   help="with --tables-from: recompute each job's windows from its recording in "
                        "DIR with --build's sfctl replay")
    p.add_argument("--rewindow", type=int, metavar="STEPS",
                   help="with --replay-from: cut the recordings into windows of STEPS steps")
    p.add_argument("--pool", type=int, default=3,
                   help="with --rewindow: change_pool_windows for the replay (default 3)")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--window", type=int, default=20)
    p.add_argument("--warmup", type=int, default=6)
    p.add_argument("--none-runs", type=int, default=9,
                   help="fault-free jobs (their post-baseline windows are the clean control)")
    p.add_argument("--faulty", type=int, default=FAULTY,
                   help="windows with the fault on")
    p.add_argument("--clean-before", type=int, default=0,
                   help="fault-free windows between the baseline and the fault")
    p.add_argument("--none-windows", type=int, default=FAULTY,
                   help="windows after the baseline in each fault-free job")
    p.add_argument("--only-none", action="store_true", help="run the fault-free jobs only")
    p.add_argument("--rows", help="comma-separated train.py rows to run (default: all)")
    p.add_argument("--magnitudes", help="comma-separated magnitudes (default: 0.05,0.1,0.25)")
    p.add_argument("--arrivals", choices=["on", "off"], default="on",
                   help="off: the jobs mark no arrival points, so the change has no own-work "
                        "stages and no sync floor (default: on)")
    p.add_argument("--jobs", type=int, default=1,
                   help="jobs run side by side (on a host with cores to spare; default 1)")
    p.add_argument("--cpus-per-job", type=int, default=0, metavar="K",
                   help="with --jobs: pin slot i's sfd and ranks to cores iK..iK+K-1")
    a = p.parse_args()
    if a.jobs < 1 or a.cpus_per_job < 0 or a.cpus_per_job * a.jobs > (os.cpu_count() or 1):
        p.error("--jobs must be >= 1, and --jobs x --cpus-per-job at most the host's cores")
    if a.tables_from:
        records = load_records(a.tables_from)
        if a.replay_from:
            build = sfharness.Build(a.build)
            records = [replayed(build, r, a.replay_from, a.rewindow, a.pool) for r in records]
            if a.out:
                with open(a.out, "w") as f:
                    f.writelines(json.dumps(r) + "\n" for r in records)
        print(all_tables(records))
        return 0
    build = sfharness.Build(a.build)
    records = []
    plan = []
    rows = a.rows.split(",") if a.rows else [row for _n, row, _s in KINDS]
    mags = [float(m) for m in a.magnitudes.split(",")] if a.magnitudes else MAGNITUDES
    for seed in range(1, a.seeds + 1 if not a.only_none else 1):
        for _name, row, _stage in KINDS:
            if row != "none" and row in rows:
                plan += [(row, mag, seed) for mag in mags]
    if "none" in rows:
        plan += [("none", 0.0, seed) for seed in range(1, a.none_runs + 1)]
    slots = queue.Queue()
    for i in range(a.jobs):
        slots.put("%d-%d" % (i * a.cpus_per_job, (i + 1) * a.cpus_per_job - 1)
                  if a.cpus_per_job else None)
    done = threading.Lock()
    failed = []

    def one(row, mag, seed):
        cpus = slots.get()
        try:
            t0 = time.monotonic()
            rec = run(build, row, mag, seed, a.window, a.warmup,
                      a.none_windows if row == "none" else a.faulty, a.record_dir,
                      0 if row == "none" else a.clean_before, a.arrivals, cpus)
        except (RuntimeError, OSError, ValueError, subprocess.SubprocessError) as e:
            # one job's failure (a crash, a time-out) ends no other job
            log("%s mag %.2f seed %d FAILED: %s" % (row, mag, seed, e))
            failed.append((row, mag, seed))
            return
        finally:
            slots.put(cpus)
        with done:
            records.append(rec)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
            routes = [w["change"]["route"][:2] for w in scored_windows(rec)]
            log("%s mag %.2f seed %d: hidden %d, routes %s (%.0f s%s)" %
                (row, mag, seed, rec["hidden_rank"], routes, time.monotonic() - t0,
                 ", cpus " + cpus if cpus else ""))

    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for f in [pool.submit(one, *job) for job in plan]:
            f.result()
    print(all_tables(records))
    if failed:
        log("%d of %d jobs failed: %s" % (len(failed), len(plan), failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
