#!/usr/bin/python3
"""Detection of the live verdict (docs/LIVE.md) on real 4-rank DDP jobs
(Gloo, CPU) through the binding and a real sfd: for each fault row,
magnitude and seed, the job runs its baseline windows clean, one more clean
window, then the fault on its hidden rank from a known step (the onset) for
--fault-steps steps. A run is a hit when its first straggler verdict names
the hidden rank and the faulted stage at or after the onset and within the
bound of issue 48: 10 steps or 30 s, whichever is later (in steps of the
run's median step). A straggler verdict before the onset is a false verdict;
a clean row (`none`) must carry none. Change verdicts (the whole job slower,
rank null: on a shared host, its load) are counted apart, every run. A run shorter than its
bound that saw no verdict counts as a miss and is marked so.

Prints one line a run and, per row and magnitude, hits of runs with the
delay in steps; then the false verdicts of all runs. Same pieces as
tests/ddp/test_ddp_live.py, longer.

usage: detect_matrix.py --build DIR [--rows data_wait forward_host ...]
                        [--magnitudes 0.1 0.05] [--seeds 1 2 3] [--fault-steps 600]
                        [--sfd-key live_slow_effect_frac=0 ...]
"""

import argparse
import json
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import faults  # noqa: E402
import sfharness  # noqa: E402

WARMUP, WINDOW, BASELINE = 6, 50, 3
BOUND_STEPS, BOUND_S = 10, 30.0
ROWS = ["data_wait", "forward_host", "backward_compute", "callback_barrier"]


def run_one(build, row, magnitude, seed, fault_steps, extra_keys=None):
    """One job: (first live verdict start or None, the run's figures)."""
    fault_windows = max(1, -(-fault_steps // WINDOW))
    phases = "A" * (BASELINE + 1) + "B" * fault_windows
    job = "live-%s-%g-%d-%d" % (row, magnitude, seed, os.getpid())
    keys = {"live_calibration_steps": BASELINE * WINDOW}
    keys.update(extra_keys or {})
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=WINDOW, sfd_keys=keys) as sfd:
        res = sfharness.train(build, job, ["--ranks", "4", "--fault", row, "--seed", str(seed),
                                           "--magnitude", str(magnitude), "--warmup",
                                           str(WARMUP), "--steps", str(WINDOW * len(phases)),
                                           "--phases", phases],
                              sf_socket=sfd.ingest, timeout=1800)
        sfd.windows(job, len(phases), timeout=120)
        ev = sfd.json("events", job) or {}
    starts = [e["verdict"] for e in ev.get("events", []) if e["event"] == "start"]
    res["onset"] = WARMUP + (BASELINE + 1) * WINDOW
    res["fault_steps"] = fault_windows * WINDOW
    res["tested"] = ev.get("steps_tested", 0)
    res["changes"] = [v["detected_step"] for v in starts if v["kind"] == "change"]
    stragglers = [v for v in starts if v["kind"] == "straggler"]
    return (stragglers[0] if stragglers else None), stragglers, res


def score(row, first, starts, res):
    """(outcome, delay in steps or None): hit, miss, wrong, late, early, clean,
    false. `first` is the run's first straggler verdict, `starts` all of them."""
    onset, stage = res["onset"], faults.FAULTS[row]
    if stage is None:
        return ("false" if starts else "clean"), None
    if first is None:
        return "miss", None
    if first["detected_step"] < onset:
        return "early", None
    delay = first["detected_step"] - onset
    bound = max(BOUND_STEPS, int(BOUND_S / res["median_step_s"]))
    right = first["rank"] == res["hidden_rank"] and first["stage"] == stage
    if not right:
        return "wrong", delay
    return ("hit" if delay < bound else "late"), delay


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--rows", nargs="+", default=ROWS + ["none"])
    p.add_argument("--magnitudes", nargs="+", type=float, default=[0.1, 0.05])
    p.add_argument("--seeds", nargs="+", type=int, default=[1, 2, 3])
    p.add_argument("--fault-steps", type=int, default=600)
    p.add_argument("--sfd-key", action="append", default=[], metavar="KEY=VALUE",
                   help="an [sfd] key for every run, e.g. live_slow_effect_frac=0")
    a = p.parse_args()
    extra = dict(kv.split("=", 1) for kv in a.sfd_key)
    if not sfharness.has_torch():
        sys.exit("/usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
    build = sfharness.Build(a.build)
    cells, false_runs, runs, change_runs = {}, 0, 0, 0
    for row in a.rows:
        mags = [0.0] if faults.FAULTS[row] is None else a.magnitudes
        for mag in mags:
            for seed in a.seeds:
                first, starts, res = run_one(build, row, mag, seed, a.fault_steps, extra)
                outcome, delay = score(row, first, starts, res)
                bound = max(BOUND_STEPS, int(BOUND_S / res["median_step_s"]))
                short = res["fault_steps"] < bound and outcome == "miss"
                runs += 1
                false_runs += outcome in ("early", "false")
                change_runs += bool(res["changes"])
                cells.setdefault((row, mag), []).append((outcome, delay))
                print(json.dumps({"row": row, "magnitude": mag, "seed": seed,
                                  "outcome": outcome, "delay_steps": delay,
                                  "bound_steps": bound, "run_shorter_than_bound": short,
                                  "median_step_ms": round(1000 * res["median_step_s"], 2),
                                  "hidden_rank": res["hidden_rank"], "steps_tested": res["tested"],
                                  "change_verdicts_at": res["changes"],
                                  "first_straggler_verdict": first}), flush=True)
    for (row, mag), got in sorted(cells.items()):
        hits = [d for o, d in got if o == "hit"]
        what = "clean" if faults.FAULTS[row] is None else "hit"
        print("%s %.2f: %s %d of %d%s" % (
            row, mag, what, sum(o == what for o, _ in got), len(got),
            " (delays %s steps)" % " ".join(map(str, sorted(hits))) if hits else ""))
    print("false straggler verdicts (before the onset, or on a clean run): %d of %d runs"
          % (false_runs, runs))
    print("runs with a change verdict (the whole job): %d of %d" % (change_runs, runs))


if __name__ == "__main__":
    main()
