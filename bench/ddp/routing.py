"""Scores routing methods on report windows (the paper's Table 4).

Owns the comparison: StageFrontier's routing order (by advance_s) and the
five baselines, all read from the same report window (max_s, mean_s,
spread_s, slowest_rank_s, rank0_s per reporting group), and the metrics
top-1, top-2, candidate hit and candidate-set size. It must not run jobs or
recompute the accounting: every number comes from the report JSON.
"""

import math

TAU_DEFAULT = 0.80
STRONG_LABELS = ("direct_exposure", "sync_wait_dependent", "likely_sync_wait")

# method name -> report field that orders it
METHODS = [
    ("StageFrontier", "advance_s"),
    ("per-stage max", "max_s"),
    ("per-stage mean", "mean_s"),
    ("raw rank spread", "spread_s"),
    ("slowest-rank breakdown", "slowest_rank_s"),
    ("rank-0 local total", "rank0_s"),
]


def _num(x):
    return 0.0 if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def units(window):
    """Reporting groups when the report has them, else the stages."""
    g = window.get("groups")
    return g if g else window["stages"]


def order(window, field):
    """Names sorted by field, descending; ties keep schema order."""
    us = units(window)
    idx = sorted(range(len(us)), key=lambda i: (-_num(us[i].get(field)), i))
    return [us[i]["name"] for i in idx]


def candidate_set(window, field, tau):
    """Shortest prefix of the order whose cumulative score reaches tau of the
    total. For StageFrontier this is the report's own routing_set."""
    if field == "advance_s" and "routing_set" in window:
        return list(window["routing_set"])
    us = {u["name"]: _num(u.get(field)) for u in units(window)}
    total = sum(us.values())
    if total <= 0:
        return []
    out, acc = [], 0.0
    for name in order(window, field):
        out.append(name)
        acc += us[name]
        if acc >= tau * total - 1e-12:
            break
    return out


def group_of(window, stage):
    """The reporting group a default-schema stage name belongs to."""
    for u in units(window):
        if u["name"] == stage or u["name"] == stage.split("@")[0]:
            return u["name"]
    return stage


def score(window, expected, tau=TAU_DEFAULT):
    """Per-method outcome on one window for a seeded stage (None: control)."""
    out = {}
    for method, field in METHODS:
        o = order(window, field)
        cs = candidate_set(window, field, tau)
        r = {"order": o, "set": cs, "size": len(cs)}
        if expected is not None:
            g = group_of(window, expected)
            r["top1"] = bool(o) and o[0] == g
            r["top2"] = g in o[:2]
            r["hit"] = g in cs
        out[method] = r
    return out


def tau_of(window):
    g = window.get("gates") or {}
    return float(g.get("tau", TAU_DEFAULT))


def strong_labels(window):
    return [l for l in window.get("labels", []) if l in STRONG_LABELS]


def share(window, name):
    for u in units(window):
        if u["name"] == name:
            return _num(u.get("share"))
    return 0.0


def table4(outcomes):
    """outcomes: list of score() results on fault rows. Returns text rows."""
    lines = ["| method | windows | top-1 | top-2 | candidate hit | mean set size | max set size |",
             "|---|---|---|---|---|---|---|"]
    n = len(outcomes)
    for method, _ in METHODS:
        rs = [o[method] for o in outcomes]
        if not rs:
            continue
        t1 = sum(r["top1"] for r in rs)
        t2 = sum(r["top2"] for r in rs)
        hit = sum(r["hit"] for r in rs)
        sizes = [r["size"] for r in rs]
        lines.append("| %s | %d | %d/%d (%.0f %%) | %d/%d (%.0f %%) | %d/%d (%.0f %%) | %.2f | %d |" % (
            method, n, t1, n, 100.0 * t1 / n, t2, n, 100.0 * t2 / n, hit, n, 100.0 * hit / n,
            sum(sizes) / float(n), max(sizes)))
    return lines
