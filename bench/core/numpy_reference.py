#!/usr/bin/python3
"""Vectorized NumPy reference of the accounting (docs/SPEC.md section 1) for one
dense window of the default schema, where every stage is its own reporting
group. It owns only this independent re-derivation, used to time the C core
side by side and to cross-check its numbers; it is not used by sfd or sfctl.

Integer nanoseconds (int64) throughout, medians as the design defines them
(lo + (hi - lo) // 2 for even counts), doubles only for the final ratios.
"""
import argparse
import math
import os
import sys
import time

import numpy as np

DUMP_MAGIC = 0x314D424346534653
DEFAULT_STAGES = [
    "data.next_wait",
    "model.fwd_loss_cpu_wall",
    "model.backward_cpu_wall",
    "callbacks.cpu_wall",
    "optim.step_cpu_wall",
    "step.other_cpu_wall",
]
GATES = {
    "residual_share_max": 0.10,
    "overlap_share_max": 0.02,
    "dominance_share_min": 0.35,
    "gain_ratio_min": 0.5,
    "tie_tol": 0.05,
    "leader_gap_tol_min_s": 0.001,
    "leader_gap_tol_frac": 0.02,
    "leader_switch_rate_max": 0.3,
    "tau": 0.80,
    "model_fit": False,
    "share_floor_s": 1e-6,
    "suspect_ranks_max": 3,
}
LABELS = [
    "frontier_accounting", "telemetry_limited", "role_aware_needed", "co_critical",
    "direct_exposure", "sync_wait_dependent", "likely_sync_wait",
    "forward_event_scope_limited", "forward_device_supported",
    "forward_host_overhead_suspected", "forward_spillover_suspected",
    "gradient_accumulation_ambiguous", "role_aware_applied",
]


def llround(x):
    """C llround for the non-negative values used here: half away from zero."""
    return int(math.floor(x + 0.5))


def design_median(sorted_lo, sorted_hi):
    """lo + (hi - lo) // 2; operands are >= 0, so floor is toward zero."""
    return sorted_lo + (sorted_hi - sorted_lo) // 2


def median_along(a, axis):
    """The design's integer median of a non-negative int64 array along axis."""
    n = a.shape[axis]
    lo_k, hi_k = (n - 1) // 2, n // 2
    part = np.partition(a, [lo_k, hi_k] if lo_k != hi_k else hi_k, axis=axis)
    lo = np.take(part, lo_k, axis=axis)
    hi = np.take(part, hi_k, axis=axis)
    return design_median(lo, hi)


def clipped_gains(P_end, E, d, baseline):
    """Direct-exposure gain of every stage: clip d to the baseline, recompute
    the end frontier, sum E - E' over steps. P'[S] = P[S] - saving."""
    saving = np.maximum(d - baseline, 0)                 # [T, R, S]
    clipped_end = (P_end[:, :, None] - saving).max(axis=1)   # [T, S]
    return (E[:, None] - clipped_end).sum(axis=0)


def stable_desc(values):
    """Indices ordered by value descending, ties in schema order."""
    return [int(i) for i in np.argsort(-np.asarray(values), kind="stable")]


def leader_evidence(leaders, gaps, n_ranks):
    """Per stage and rank: unique-lead counts and the median gap while leading."""
    T, S = leaders.shape
    counts = np.zeros((n_ranks, S), dtype=np.int64)
    median_gap = {}
    t_idx, s_idx = np.nonzero(leaders >= 0)
    if t_idx.size == 0:
        return counts, median_gap
    r_idx = leaders[t_idx, s_idx]
    g = gaps[t_idx, s_idx]
    np.add.at(counts, (r_idx, s_idx), 1)
    order = np.lexsort((g, s_idx, r_idx))
    r_idx, s_idx, g = r_idx[order], s_idx[order], g[order]
    key = r_idx * S + s_idx
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    lens = np.diff(np.r_[starts, key.size])
    lo = g[starts + (lens - 1) // 2]
    hi = g[starts + lens // 2]
    med = design_median(lo, hi)
    for st, m in zip(starts, med):
        median_gap[(int(r_idx[st]), int(s_idx[st]))] = int(m)
    return counts, median_gap


def labels_of(out, gates, n_ranks, floor_ok):
    """Routing set, co-critical set, downgrades and labels (no side evidence,
    no roles, no accumulation: a plain CSV window)."""
    S = len(out["advance"])
    adv = out["advance"]
    order = stable_desc(adv)
    out["routing_order"] = order
    routing = []
    if floor_ok:
        target = gates["tau"] * float(out["exposed_total"])
        cum = 0
        for g in order:
            routing.append(g)
            cum += adv[g]
            if float(cum) >= target:
                break
    out["routing_set"] = routing
    downgrades = []
    if out["residual_share"] > gates["residual_share_max"]:
        downgrades.append("residual_share")
    if not floor_ok:
        downgrades.append("below_share_floor")
    if n_ranks == 1:
        downgrades.append("single_rank")
    out["downgrade_reasons"] = downgrades
    labels = set()
    if out["steps"] > 0:
        labels.add("frontier_accounting")
    if downgrades:
        labels.add("telemetry_limited")
    out["co_critical_stages"] = []
    out["suspect_ranks"] = []
    out["leader_switch_rate"] = 0.0
    if floor_ok:
        L = order[0]
        second = order[1] if S > 1 else None
        share, gain = out["share"], out["gain"]
        share_l = share[L]
        share_2 = share[second] if second is not None else 0.0
        gain_l = gain[L]
        ratio = gain_l / share_l if share_l > 0 else math.nan
        by_gain = stable_desc(gain)
        top_gain = gain[by_gain[0]]
        second_gain = gain[by_gain[1]] if S > 1 else 0.0
        dominant = share_l >= gates["dominance_share_min"] and share_l - share_2 > gates["tie_tol"]
        leaders = out["step_leaders"][:, L]
        both = (leaders[1:] >= 0) & (leaders[:-1] >= 0)
        eligible = int(both.sum())
        switches = int((both & (leaders[1:] != leaders[:-1])).sum())
        out["leader_switch_rate"] = switches / eligible if eligible else 0.0
        led = leaders[leaders >= 0]
        if led.size:
            ranks_, counts_ = np.unique(led, return_counts=True)
            sus = sorted(zip((-counts_).tolist(), ranks_.tolist()))[: gates["suspect_ranks_max"]]
            out["suspect_ranks"] = [(r, -c) for c, r in sus]
        if n_ranks >= 2:
            tie = share_l - share_2 <= gates["tie_tol"]
            gain_rule = S > 1 and top_gain >= gates["tie_tol"] and top_gain - second_gain <= gates["tie_tol"]
            switching = out["leader_switch_rate"] > gates["leader_switch_rate_max"]
            unexplained = dominant and ratio < gates["gain_ratio_min"] and not gates["model_fit"]
            if tie or gain_rule or switching or unexplained:
                labels.add("co_critical")
                cc = set(order[:2])
                if gain_rule:
                    cc |= {by_gain[0], by_gain[1]}
                out["co_critical_stages"] = sorted(cc)
            if "telemetry_limited" not in labels and dominant:
                by_spread = stable_desc(out["spread"])
                if (ratio >= gates["gain_ratio_min"] and out["spread"][L] > 0
                        and L in by_spread[:2]):
                    labels.add("direct_exposure")
                if ratio < gates["gain_ratio_min"] and gates["model_fit"]:
                    labels.add("sync_wait_dependent")
                    if adv[L] > out["mean"][L]:
                        labels.add("likely_sync_wait")
    out["labels"] = [name for name in LABELS if name in labels]


def reference(d, gates=GATES):
    """The dense report of one complete window. d: int64 [steps, ranks, stages],
    ranks 0..n-1 in order, residual last. Returns a dict of plain numbers,
    lists and arrays (ns as Python ints)."""
    T, R, S = d.shape
    P = np.cumsum(d, axis=2)                             # prefixes [T, R, S]
    F = P.max(axis=1)                                    # frontier [T, S]
    a = np.diff(F, axis=1, prepend=0)                    # advances [T, S]
    E = F[:, -1]
    out = {"steps": T, "ranks": R}
    exposed = int(E.sum())
    out["exposed_total"] = exposed
    out["telescoping_max_abs_err"] = int(np.abs(a.sum(axis=1) - E).max()) if T else 0
    adv = a.sum(axis=0)
    out["advance"] = [int(x) for x in adv]
    dmax, dmin = d.max(axis=1), d.min(axis=1)
    out["max"] = [int(x) for x in dmax.sum(axis=0)]
    out["spread"] = [int(x) for x in (dmax - dmin).sum(axis=0)]
    dsum = d.sum(axis=(0, 1))
    out["mean"] = [int(x) // R for x in dsum]
    slowest = P[:, :, -1].argmax(axis=1)                 # lowest rank on ties
    out["slowest_rank"] = [int(x) for x in d[np.arange(T), slowest, :].sum(axis=0)]
    out["rank0"] = [int(x) for x in d[:, 0, :].sum(axis=0)]
    psum = P.sum(axis=(0, 1))
    fsum = F.sum(axis=0)
    out["lag"] = [int(f) - int(p) // R for f, p in zip(fsum, psum)]
    out["delta_lag"] = [x - m for x, m in zip(out["advance"], out["mean"])]
    end_sum = int(P[:, :, -1].sum())
    out["residual_share"] = float(int(d[:, :, -1].sum())) / float(end_sum) if end_sum > 0 else math.nan

    # Leaders and gaps: the second element of the descending multiset of P.
    e_sorted = np.sort(E)
    median_e = int(design_median(e_sorted[(T - 1) // 2], e_sorted[T // 2]))
    tol = max(llround(gates["leader_gap_tol_min_s"] * 1e9),
              llround(gates["leader_gap_tol_frac"] * float(median_e)))
    out["leader_gap_tol"] = tol
    if R >= 2:
        second = np.partition(P, R - 2, axis=1)[:, R - 2, :]
        gaps = F - second
        leaders = np.where(gaps > tol, P.argmax(axis=1), -1)
    else:
        gaps = np.zeros_like(F)
        leaders = np.full(F.shape, -1, dtype=np.int64)
    out["step_leaders"] = leaders
    counts, median_gap = leader_evidence(leaders, gaps, R)
    best = counts.max(axis=0)
    out["leader_rank"] = [int(counts[:, s].argmax()) if best[s] > 0 else None for s in range(S)]
    out["leader_steps"] = [int(x) for x in best]
    out["rank_leader_steps"] = counts
    out["median_gap"] = median_gap
    slack = (int(fsum.sum()) - P.sum(axis=(0, 2))) // (T * S)
    out["mean_slack"] = slack

    # Direct exposure against both baselines.
    floor_ok = T > 0 and exposed >= llround(gates["share_floor_s"] * 1e9)
    P_end = P[:, :, -1]
    rank_base = median_along(d, axis=0)[None, :, :]      # [1, R, S]
    cohort_base = median_along(d, axis=1)[:, None, :]    # [T, 1, S]
    out["gain_rank_median"] = [int(x) for x in clipped_gains(P_end, E, d, rank_base)]
    out["gain_cohort_median"] = [int(x) for x in clipped_gains(P_end, E, d, cohort_base)]
    if floor_ok:
        out["share"] = [float(x) / float(exposed) for x in out["advance"]]
        out["gain"] = [float(max(rm, co)) / float(exposed)
                       for rm, co in zip(out["gain_rank_median"], out["gain_cohort_median"])]
    else:
        out["share"] = [math.nan] * S
        out["gain"] = [math.nan] * S
    labels_of(out, gates, R, floor_ok)
    return out


# ---- benchmark -----------------------------------------------------------------

def load_matrix(path):
    raw = np.fromfile(path, dtype="<i8")
    if raw.size < 4 or int(raw[0]) != DUMP_MAGIC:
        raise ValueError(f"{path}: not a bench_core matrix dump")
    T, R, S = (int(x) for x in raw[1:4])
    if raw.size != 4 + T * R * S:
        raise ValueError(f"{path}: truncated ({raw.size - 4} of {T * R * S} cells)")
    return raw[4:].reshape(T, R, S)


def frontier_pass(d):
    """The same frontier pass as bench_core: prefixes, max over ranks,
    advances summed over steps."""
    F = np.cumsum(d, axis=2).max(axis=1)
    return np.diff(F, axis=1, prepend=0).sum(axis=0)


def best_of(fn, reps, min_s=2e-3):
    t0 = time.perf_counter()
    fn()
    once = time.perf_counter() - t0
    inner = max(1, int(min_s / once)) if once > 0 else 1
    best = math.inf
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        best = min(best, (time.perf_counter() - t0) / inner)
    return best


def bench(args):
    names = sorted((f for f in os.listdir(args.bench) if f.startswith("matrix_")),
                   key=lambda f: int(f.split("_")[1]))
    rows = []
    for name in names:
        d = load_matrix(os.path.join(args.bench, name))
        T, R, S = d.shape
        t_front = best_of(lambda: frontier_pass(d), args.reps)
        result = {}

        def full():
            result["r"] = reference(d)
        t_rep = best_of(full, args.reps, min_s=0)
        r = result["r"]
        rows.append(["numpy", R, T, S, f"{t_front:.9g}", "", f"{t_rep:.9g}", r["exposed_total"],
                     ",".join(map(str, r["advance"])), ",".join(map(str, r["gain_rank_median"])),
                     ",".join(map(str, r["gain_cohort_median"])), ",".join(r["labels"])])
        cells = T * R * S
        print(f"{R:>6} x {T} x {S}  frontier {cells / t_front:.3e} cells/s  "
              f"report {t_rep * 1e3:.3f} ms", flush=True)
    if args.tsv:
        with open(args.tsv, "w") as f:
            for row in rows:
                f.write("\t".join(map(str, row)) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bench", metavar="DIR", required=True,
                   help="time the matrices bench_core --dump wrote to DIR")
    p.add_argument("--tsv", metavar="FILE", help="write machine-readable results")
    p.add_argument("--reps", type=int, default=3)
    bench(p.parse_args())


if __name__ == "__main__":
    sys.exit(main())
