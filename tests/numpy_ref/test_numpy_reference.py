#!/usr/bin/python3
"""Cross-check of the C accounting core against the independent NumPy
reference (bench/core/numpy_reference.py): small seeded matrices with ties,
a slow rank, a single rank and an empty window go through the real
`sfctl replay --json`, and every integer figure must match exactly.

usage: test_numpy_reference.py --sfctl PATH --reference-dir DIR
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

MS = 1_000_000


def quantized(rng, T, R, step_ns, spread):
    """Coarse values: many exact ties between ranks and across steps."""
    base = np.array([2, 30, 60, 1, 8, 0], dtype=np.int64) * MS
    noise = rng.integers(0, spread, size=(T, R, 6)) * step_ns
    return base + noise


def case_matrices():
    """(name, d[steps, ranks, stages]) pairs, all seeded."""
    rng = np.random.default_rng(20260611)
    cases = []
    d = quantized(rng, 12, 4, MS, 3)
    d[rng.random(12) < 0.75, 2, 0] += 25 * MS          # one slow data rank, most steps
    cases.append(("slow_data_rank_ties", d))
    d = quantized(rng, 9, 5, MS, 2)                     # odd steps, heavy ties
    cases.append(("heavy_ties_odd_steps", d))
    d = np.full((6, 3, 6), 5 * MS, dtype=np.int64)      # every rank identical: no leaders
    cases.append(("all_equal", d))
    d = quantized(rng, 10, 2, 1, 10 * MS)               # fine-grained, two ranks
    d[:, 1, 2] += 40 * MS                               # rank 1 persistently slow backward
    cases.append(("two_ranks_slow_backward", d))
    d = quantized(rng, 8, 1, 1, MS)
    cases.append(("single_rank", d))
    d = quantized(rng, 16, 33, 1, 3 * MS)
    d[5, 17, 1] += 200 * MS                             # a transient forward spike
    cases.append(("transient_spike_33_ranks", d))
    d = quantized(rng, 20, 7, MS // 2, 4)
    d[:, :, 5] += 30 * MS                               # a residual above the gate
    cases.append(("large_residual", d))
    d = quantized(rng, 14, 6, MS, 3)
    d[:, :, 0] += (np.arange(14)[:, None] % 6 == np.arange(6)[None, :]) * 20 * MS
    cases.append(("rotating_leader", d))                # a different rank leads each step
    d = quantized(rng, 10, 4, 1, MS)
    d[:, 1, 0] += 300 * MS                              # a dominant, directly exposed stage
    cases.append(("dominant_slow_data", d))
    cases.append(("all_zero", np.zeros((4, 3, 6), dtype=np.int64)))
    d = quantized(rng, 1, 5, 1, 5 * MS)
    cases.append(("single_step", d))
    for i in range(12):                                 # random shapes
        T, R = int(rng.integers(1, 25)), int(rng.integers(2, 40))
        d = quantized(rng, T, R, int(rng.choice([1, MS // 4, MS])), int(rng.integers(2, 12)))
        slow = int(rng.integers(0, R))
        d[rng.random(T) < rng.random(), slow, int(rng.integers(0, 5))] += int(rng.integers(1, 60)) * MS
        cases.append((f"random_{i}", d))
    return cases


def write_csv(path, d, names):
    T, R, S = d.shape
    with open(path, "w") as f:
        f.write("step,rank," + ",".join(names) + "\n")
        for t in range(T):
            for r in range(R):
                secs = (f"{int(v) // 10**9}.{int(v) % 10**9:09d}" for v in d[t, r])
                f.write(f"{t},{r}," + ",".join(secs) + "\n")


def ns(x):
    return None if x is None else round(x * 1e9)


def ratio(x):
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def json_ratio(got, expected):
    """The report prints ratios with a fixed number of significant digits
    (15, or 17 for a full round trip): the reference's double, printed the
    same way, must give back exactly the core's value."""
    if got is None or expected is None or got == expected:
        return got
    for digits in (15, 17):
        if got == float(f"{expected:.{digits}g}"):
            return expected
    return got


class Checker:
    def __init__(self, case):
        self.case = case
        self.errors = []

    def eq(self, field, got, expected):
        if got != expected:
            self.errors.append(f"{self.case}: {field}: core {got!r}, reference {expected!r}")


def compare(case, rep, ref, names):
    c = Checker(case)
    S = len(names)
    c.eq("window.steps", rep["window"]["steps"], ref["steps"])
    c.eq("window.ranks", rep["window"]["ranks"], ref["ranks"])
    c.eq("exposed_total", ns(rep["exposed_total_s"]), ref["exposed_total"])
    c.eq("telescoping_max_abs_err", ns(rep["telescoping_max_abs_err"]),
         ref["telescoping_max_abs_err"])
    c.eq("leader_gap_tol", ns(rep["gates"]["leader_gap_tol_s"]), ref["leader_gap_tol"])
    stage_fields = [("advance_s", "advance"), ("max_s", "max"), ("mean_s", "mean"),
                    ("spread_s", "spread"), ("slowest_rank_s", "slowest_rank"),
                    ("rank0_s", "rank0"), ("lag_s", "lag"), ("delta_lag_s", "delta_lag"),
                    ("gain_rank_median_s", "gain_rank_median"),
                    ("gain_cohort_median_s", "gain_cohort_median")]
    for s, st in enumerate(rep["stages"]):
        c.eq(f"stages[{s}].name", st["name"], names[s])
        for jkey, rkey in stage_fields:
            c.eq(f"{names[s]}.{rkey}", ns(st[jkey]), ref[rkey][s])
        c.eq(f"{names[s]}.leader_rank", st["leader_rank"], ref["leader_rank"][s])
        c.eq(f"{names[s]}.leader_steps", st["leader_steps"], ref["leader_steps"][s])
        share, gain = ratio(ref["share"][s]), ratio(ref["gain"][s])
        c.eq(f"{names[s]}.share", json_ratio(st["share"], share), share)
        c.eq(f"{names[s]}.gain", json_ratio(st["gain"], gain), gain)
    c.eq("routing_set", rep["routing_set"], [names[g] for g in ref["routing_set"]])
    c.eq("routing_order", rep["routing_order"], [names[g] for g in ref["routing_order"]])
    c.eq("co_critical_stages", rep["co_critical_stages"],
         [names[g] for g in ref["co_critical_stages"]])
    c.eq("labels", rep["labels"], ref["labels"])
    c.eq("downgrade_reasons", rep["downgrade_reasons"], ref["downgrade_reasons"])
    c.eq("suspect_ranks", [(x["rank"], x["steps"]) for x in rep["suspect_ranks"]],
         ref["suspect_ranks"])
    c.eq("leader_switch_rate", json_ratio(rep["leader_switch_rate"], ref["leader_switch_rate"]),
         ref["leader_switch_rate"])
    c.eq("ranks listed", [x["rank"] for x in rep["ranks"]], list(range(ref["ranks"])))
    for x in rep["ranks"]:
        r = x["rank"]
        if r >= ref["ranks"]:
            continue
        leads = {names[s]: int(ref["rank_leader_steps"][r, s]) for s in range(S)
                 if ref["rank_leader_steps"][r, s] > 0}
        gaps = {names[s]: g for (rr, s), g in ref["median_gap"].items() if rr == r}
        c.eq(f"ranks[{r}].leader_steps", x["leader_steps"], leads)
        c.eq(f"ranks[{r}].median_gap", {k: ns(v) for k, v in x["median_gap_s"].items()}, gaps)
        c.eq(f"ranks[{r}].mean_slack", ns(x["mean_slack_s"]), int(ref["mean_slack"][r]))
    return c.errors


def run_case(sfctl, tmp, name, d, reference, names):
    path = os.path.join(tmp, f"{name}.csv")
    write_csv(path, d, names)
    cmd = [sfctl, "replay", "--json", "--warmup-steps", "0", "--window-steps",
           str(d.shape[0]), path]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        return [f"{name}: {' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()}"]
    windows = json.loads(proc.stdout)
    if len(windows) != 1:
        return [f"{name}: expected one window, got {len(windows)}"]
    return compare(name, windows[0], reference(d), names)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--sfctl", required=True)
    p.add_argument("--reference-dir", required=True)
    args = p.parse_args()
    sys.path.insert(0, args.reference_dir)
    import numpy_reference
    names = numpy_reference.DEFAULT_STAGES
    errors = []
    cases = case_matrices()
    with tempfile.TemporaryDirectory(prefix="sf_numpy_ref_") as tmp:
        for name, d in cases:
            errs = run_case(args.sfctl, tmp, name, d, numpy_reference.reference, names)
            print(f"{name}: {d.shape[1]} ranks x {d.shape[0]} steps: "
                  f"{'ok' if not errs else f'{len(errs)} mismatches'}")
            errors += errs
    for e in errors:
        print("MISMATCH " + e)
    print(f"{len(cases)} cases, {len(errors)} mismatches")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
