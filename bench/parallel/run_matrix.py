#!/usr/bin/python3
"""The fault matrix for parallel layouts (docs/EVALUATION.md, "Parallel
layouts"): 4-rank pipeline x data parallel (GPipe, 1F1B), tensor x data
parallel and sharded data parallel jobs (bench/parallel/pjob.py, Gloo on
CPU) against a real sfd, a fault on one hidden rank in the window after the
baseline windows. Scores the answer an operator reads first: the window's
straggler verdict (its rank and origin stage), else the change's first
suspect rank and first route stage. Prints markdown tables.

  /usr/bin/python3 bench/parallel/run_matrix.py --build build-rel --out par.jsonl
  /usr/bin/python3 bench/parallel/run_matrix.py --tables-from par.jsonl
  /usr/bin/python3 bench/parallel/run_matrix.py --tables-from par.jsonl --record-dir rec \\
      --replay-with build-rel/daemon/sfctl/sfctl   # the same rows, another core
  /usr/bin/python3 bench/parallel/run_matrix.py --build build-rel --layouts pp-gpipe \\
      --faults backward --magnitudes 0.1 --seeds 1 --check-cell    # one cell (CTest)

Each job: --warmup steps, then --baseline clean windows (sfd's baseline of
the change) and --faulty windows with the fault, of --window steps each.
Clean jobs have the same windows without a fault. The change pools one
window (change_pool_windows = 1): a fault window is never pooled with the
clean windows before it.

Scoring, per fault window: at 0.1 (and above) a hit when the first answer
names the hidden rank and the faulted stage; at 0.05 when the hidden rank is
among the first two ranks of the answer (the verdict's rank, then the
change's suspects) and the faulted stage among its first two stages (the
verdict's origin, then the change's route). A clean window (a clean job's,
or a fault job's baseline window) with a straggler verdict or a change
route is a false alarm.
"""

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))
sys.path.insert(0, HERE)

import pjob  # noqa: E402
import sfharness  # noqa: E402

JOB = os.path.join(HERE, "pjob.py")
SYNC_WAIT = ".sync_wait"
KINDS = ["data", "forward", "backward", "communication"]


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


def group(stage):
    return stage[:-len(SYNC_WAIT)] if stage and stage.endswith(SYNC_WAIT) else stage


def keep_window(w):
    return {"index": w["window"]["index"], "ranks": w["window"]["ranks"],
            "steps": w["window"]["steps"], "straggler": w.get("straggler"),
            "change": w.get("change"), "labels": w.get("labels"),
            "downgrades": w.get("downgrade_reasons"),
            "communication": (w.get("communication") or {}).get("verdict")}


def run_job(build, sfd, a, layout, fault, mag, seed, tag=""):
    job = "par-%s-%s-%g-%d%s-%d" % (layout, fault, mag, seed, tag, os.getpid())
    n_windows = a.baseline + a.faulty
    fd, result = tempfile.mkstemp(prefix="sf-par-", suffix=".json")
    os.close(fd)
    argv = ["--job-id", job, "--layout", layout, "--fault", fault, "--magnitude", str(mag),
            "--seed", str(seed), "--warmup", str(a.warmup), "--steps",
            str(a.window * n_windows), "--fault-from", str(a.window * a.baseline),
            "--result", result]
    t0 = time.monotonic()
    try:
        r = subprocess.run([sfharness.PYTHON, JOB] + argv,
                           env=build.env({"SF_SOCKET": sfd.ingest}), stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True,
                           timeout=a.job_timeout)
        if r.returncode != 0:
            raise RuntimeError("job failed (rc %d): %s" % (r.returncode, r.stdout[-2000:]))
        with open(result) as f:
            res = json.load(f)
    finally:
        os.unlink(result)
    wins = sfd.windows(job, n_windows, timeout=90)
    if a.record_dir:
        # The job's rows, for `sfctl replay` of the same windows offline.
        path = os.path.join(a.record_dir, "%s-%s-%g-%d%s.jsonl" % (layout, fault, mag, seed, tag))
        r = sfd.sfctl("record", job, "-o", path)
        if r.returncode != 0:
            log("sfctl record %s: rc %d: %s" % (job, r.returncode, r.stderr.strip()))
    log("%s %s %g seed %d: %.1f s, hidden rank %d, clean step %.1f ms, delay %.2f ms" %
        (layout, fault, mag, seed, time.monotonic() - t0, res["hidden_rank"],
         1e3 * res["clean_step_s"], 1e3 * res["delay_s"]))
    return {"layout": layout, "fault": fault, "magnitude": mag, "seed": seed, "job": job,
            "result": res, "baseline": a.baseline, "window": a.window,
            "windows": [keep_window(w) for w in wins
                        if "window_partial" not in (w.get("downgrade_reasons") or [])]}


# ---------------------------------------------------------------------------
# scoring

def answer(w):
    """The ranks and stages of the first answer, in the order an operator
    reads them: the straggler verdict, then the change."""
    ranks, stages = [], []
    v = w.get("straggler")
    if v:
        ranks.append(v["rank"])
        stages.append(group(v["origin_stage"]))
    c = w.get("change") or {}
    for s in c.get("suspect_ranks") or []:
        if s["rank"] not in ranks:
            ranks.append(s["rank"])
    for s in c.get("route") or []:
        if group(s) not in stages:
            stages.append(group(s))
    return ranks, stages


def alarm(w):
    return bool(w.get("straggler")) or bool((w.get("change") or {}).get("route"))


def fault_windows(rec):
    return [w for w in rec["windows"] if w["index"] >= rec["baseline"]]


def clean_windows(rec):
    if rec["fault"] == "none":
        return list(rec["windows"])
    return [w for w in rec["windows"] if w["index"] < rec["baseline"]]


def score(rec, w):
    ranks, stages = answer(w)
    hid, exp = rec["result"]["hidden_rank"], rec["result"]["expected_stage"]
    top1 = ranks[:1] == [hid] and stages[:1] == [exp]
    top2 = hid in ranks[:2] and exp in stages[:2]
    return {"top1": top1, "top2": top2, "rank1": ranks[:1] == [hid],
            "first": "%s/%s" % (ranks[0] if ranks else "-",
                                 short(stages[0]) if stages else "-"),
            "by": "verdict" if w.get("straggler") else ("change" if ranks or stages else "none")}


def short(stage):
    return stage.split(".")[0] if not stage.startswith("model.") else \
        stage.split(".")[1].split("_")[0]


def share(k, n):
    return "%d/%d (%.0f %%)" % (k, n, 100.0 * k / n) if n else "-"


def counts(items):
    c = {}
    for i in items:
        c[i] = c.get(i, 0) + 1
    return ", ".join("%s x%d" % (k, v) for k, v in sorted(c.items(), key=lambda kv: -kv[1]))


def tables(recs):
    ok = [r for r in recs if "error" not in r]
    failed = [r for r in recs if "error" in r]
    layouts = [l for l in pjob.LAYOUTS if any(r["layout"] == l for r in ok)]
    lines = ["| layout | at 0.1: first answer right | at 0.05: top two | clean windows "
             "with an alarm (of them the clean jobs') |", "|---|---|---|---|"]
    per_kind = ["", "| layout | fault | magnitude | windows | top-1 | top-2 | hidden rank first "
                "| first answers (rank/stage) | answered by |",
                "|---|---|---|---|---|---|---|---|---|"]
    for layout in layouts:
        sub = [r for r in ok if r["layout"] == layout]
        cells = {}
        for mag in (0.1, 0.05):
            sc = [score(r, w) for r in sub if r["fault"] != "none" and
                  abs(r["magnitude"] - mag) < 1e-9 for w in fault_windows(r)]
            cells[mag] = share(sum(s["top1" if mag >= 0.1 else "top2"] for s in sc), len(sc))
        cw = [w for r in sub for w in clean_windows(r)]
        cjob = [w for r in sub if r["fault"] == "none" for w in clean_windows(r)]
        lines.append("| %s | %s | %s | %s (clean jobs %s) |" % (
            layout, cells[0.1], cells[0.05], share(sum(map(alarm, cw)), len(cw)),
            share(sum(map(alarm, cjob)), len(cjob))))
        for fault in KINDS:
            for mag in sorted({r["magnitude"] for r in sub if r["fault"] == fault}, reverse=True):
                rs = [r for r in sub if r["fault"] == fault and r["magnitude"] == mag]
                sc = [score(r, w) for r in rs for w in fault_windows(r)]
                per_kind.append("| %s | %s | %.2f | %d | %s | %s | %s | %s | %s |" % (
                    layout, fault, mag, len(sc), share(sum(s["top1"] for s in sc), len(sc)),
                    share(sum(s["top2"] for s in sc), len(sc)),
                    share(sum(s["rank1"] for s in sc), len(sc)),
                    "; ".join("r%d: %s" % (r["result"]["hidden_rank"], score(r, w)["first"])
                              for r in rs for w in fault_windows(r)),
                    counts(s["by"] for s in sc)))
    out = lines + per_kind
    fa = [(r, w) for r in ok for w in clean_windows(r) if alarm(w)]
    if fa:
        out += ["", "False alarms: " + "; ".join(
            "%s %s %g seed %d window %d: %s" % (r["layout"], r["fault"], r["magnitude"],
                                                r["seed"], w["index"],
                                             "verdict rank %d at %s" % (
                                                 w["straggler"]["rank"],
                                                 w["straggler"]["origin_stage"])
                                             if w.get("straggler") else
                                             "change %s" % w["change"]["route"])
            for r, w in fa)]
    steps = {}
    for r in ok:
        steps.setdefault(r["layout"], []).append(r["result"]["clean_step_s"])
    out += ["", "Clean step (ms, median of the jobs' warmup medians): " + ", ".join(
        "%s %.1f" % (l, 1e3 * sorted(v)[len(v) // 2]) for l, v in steps.items())]
    gs = {r["result"].get("group_sync") for r in ok}
    out += ["rec.sync(group=...) used: %s" % ", ".join(str(g) for g in sorted(gs))]
    if failed:
        out += ["", "Failed runs: " + "; ".join("%s %s %g seed %d: %s" % (
            r["layout"], r["fault"], r["magnitude"], r["seed"], r["error"][:160])
            for r in failed)]
    return out


def check_cell(recs):
    """The CTest: the harness ran a job end to end and scored it."""
    if not recs or "error" in recs[0]:
        print("FAIL: %s" % (recs[0].get("error") if recs else "no run"))
        return 1
    r = recs[0]
    bad = []
    if len(r["windows"]) < r["baseline"] + 1:
        bad.append("%d closed windows, want %d" % (len(r["windows"]), r["baseline"] + 1))
    for w in r["windows"]:
        if w["ranks"] != 4 or w["steps"] != r["window"]:
            bad.append("window %d covers %d ranks, %d steps" % (w["index"], w["ranks"],
                                                                w["steps"]))
        if "role_aware_applied" not in (w["labels"] or []):
            bad.append("window %d labels %s: no role_aware_applied" % (w["index"], w["labels"]))
    if not r["result"]["delay_s"] > 0:
        bad.append("no fault armed (delay %s)" % r["result"]["delay_s"])
    for w in fault_windows(r):
        if w["change"] is None:
            bad.append("fault window %d has no change object (baseline not taken)" % w["index"])
        print("fault window %d: hidden rank %d, first answer %s" % (
            w["index"], r["result"]["hidden_rank"], score(r, w)))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


def replayed(rec, record_dir, sfctl):
    """The run with its windows as `sfctl replay` of its recording gives
    them (another build's core on the same rows)."""
    if "error" in rec:
        return rec
    path = os.path.join(record_dir, "%s-%s-%g-%d.jsonl" % (rec["layout"], rec["fault"],
                                                          rec["magnitude"], rec["seed"]))
    r = subprocess.run([sfctl, "replay", "--json", path], stdout=subprocess.PIPE,
                       universal_newlines=True, check=True)
    rec = dict(rec)
    rec["windows"] = [keep_window(w) for w in json.loads(r.stdout)
                      if "window_partial" not in (w.get("downgrade_reasons") or [])]
    return rec


def main():
    p = argparse.ArgumentParser(description="parallel-layout fault matrix against a real sfd")
    p.add_argument("--build", default=os.environ.get("SF_BUILD_DIR", "build-rel"))
    p.add_argument("--out", default=None, help="append raw runs here (JSON Lines)")
    p.add_argument("--tables-from", default=None)
    p.add_argument("--layouts", nargs="+", default=pjob.LAYOUTS, choices=pjob.LAYOUTS)
    p.add_argument("--faults", nargs="+", default=KINDS, choices=KINDS)
    p.add_argument("--magnitudes", type=float, nargs="+", default=[0.1, 0.05])
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    p.add_argument("--clean-runs", type=int, default=3, help="clean jobs per layout")
    p.add_argument("--warmup", type=int, default=8)
    p.add_argument("--window", type=int, default=30)
    p.add_argument("--baseline", type=int, default=2)
    p.add_argument("--faulty", type=int, default=1)
    p.add_argument("--change-min-frac", type=float, default=None,
                   help="sfd's change_min_frac (default: sfd's own)")
    p.add_argument("--record-dir", default=None,
                   help="keep each job's recording (sfctl record) here, for sfctl replay")
    p.add_argument("--replay-with", default=None, metavar="SFCTL",
                   help="with --tables-from and --record-dir: score each run's windows as "
                        "this sfctl replays its recording")
    p.add_argument("--job-timeout", type=float, default=300)
    p.add_argument("--check-cell", action="store_true",
                   help="run the first cell only and check that the harness works")
    a = p.parse_args()

    if a.tables_from:
        opener = gzip.open if a.tables_from.endswith(".gz") else open
        with opener(a.tables_from, "rt") as f:
            recs = [json.loads(l) for l in f if l.strip()]
        if a.replay_with:
            recs = [replayed(r, a.record_dir, a.replay_with) for r in recs]
        print("\n".join(tables(recs)))
        return 0
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return 77
    build = sfharness.Build(a.build)
    gates = {"baseline_windows": a.baseline, "change_pool_windows": 1}
    if a.change_min_frac is not None:
        gates["change_min_frac"] = a.change_min_frac
    plan = []
    for seed in a.seeds:
        for layout in a.layouts:
            for fault in a.faults:
                for mag in a.magnitudes:
                    plan.append((layout, fault, mag, seed))
    if a.check_cell:
        plan = plan[:1]
    else:
        for i in range(a.clean_runs):
            for layout in a.layouts:
                plan.append((layout, "none", 0.0, i + 1))
    recs = []
    t0 = time.monotonic()
    limits = {"max_jobs": 512, "max_jobs_per_uid": 512}
    with sfharness.Sfd(build, warmup_steps=a.warmup, window_steps=a.window, extra_gates=gates,
                       limits=limits) as sfd:
        for layout, fault, mag, seed in plan:
            try:
                rec = run_job(build, sfd, a, layout, fault, mag, seed)
            except Exception as e:  # a failed run is a row, not an abort
                log("FAILED %s %s %g seed %d: %s" % (layout, fault, mag, seed, e))
                rec = {"layout": layout, "fault": fault, "magnitude": mag, "seed": seed,
                       "error": str(e)}
            recs.append(rec)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(json.dumps(rec) + "\n")
    log("total %.0f s" % (time.monotonic() - t0))
    if a.check_cell:
        return check_cell(recs)
    print("\n".join(tables(recs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
