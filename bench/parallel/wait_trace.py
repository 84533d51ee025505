#!/usr/bin/python3
"""The wait rule's figures per window, read from a recording (sfctl record,
or run_matrix.py --record-dir), for reading a verdict of a tp or pp group
(docs/ACCOUNTING.md, "Synchronizing groups") against its rows:

  /usr/bin/python3 bench/parallel/wait_trace.py --sfctl build-rel/daemon/sfctl/sfctl REC.jsonl
  ... --steps 2     # also every step of window 2: each member's wait, own work, blame

Per window, synchronizing stage and group: the eligible steps (the most
blamed member did more own work than its replicas by more than the gap
tolerance) and how often each member was that culprit; per rank, the
replica sign counts (steps its own work was above / below its replicas'
median by more than the tolerance, and their z). The tolerance is the
window's `leader_gap_tol_s` from `sfctl replay --json`, whose verdict is
printed beside. A reading aid: the core (daemon/core/straggler.c) decides.
"""

import argparse
import json
import math
import statistics
import subprocess


def load(path):
    head, rows, wins = None, {}, []
    with open(path) as f:
        for line in f:
            o = json.loads(line)
            if o["type"] == "header":
                head = o
            elif o["type"] == "row":
                rows[(o["step"], o["rank"])] = o
            elif o["type"] == "window":
                wins.append(o)
    return head, rows, wins


def coords(row):
    out = {}
    for part in (row.get("parallel") or "").split(","):
        dim, _, val = part.partition("=")
        if val.split("/")[0].isdigit():  # index/size; not schedule=gpipe
            out[dim] = int(val.split("/")[0])
    return out


def key_without(c, dims):
    return tuple(sorted((d, v) for d, v in c.items() if d not in dims))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("recording")
    p.add_argument("--sfctl", default="build-rel/daemon/sfctl/sfctl")
    p.add_argument("--steps", type=int, default=None, help="print every step of this window")
    a = p.parse_args()
    head, rows, wins = load(a.recording)
    schema = head["schema"]
    stages, groups = schema["stages"], schema.get("sync_groups") or []
    sync = [k for k, s in enumerate(stages) if k + 1 < len(stages) and
            stages[k + 1] == s + ".sync_wait"]
    rep = json.loads(subprocess.run([a.sfctl, "replay", "--json", a.recording], check=True,
                                    stdout=subprocess.PIPE).stdout)
    ranks = sorted({r for _, r in rows})
    cs = {r: coords(next(o for (t, q), o in rows.items() if q == r)) for r in ranks}
    for wi, w in enumerate(wins):
        tol = rep[wi]["gates"]["leader_gap_tol_s"] * 1e9 if wi < len(rep) else 1e6
        v = rep[wi].get("straggler") if wi < len(rep) else None
        print("window %d (tol %.2f ms): verdict %s" % (
            w["index"], tol / 1e6, "rank %d at %s" % (v["rank"], v["origin_stage"]) if v else "-"))
        steps = range(w["first_step"], w["last_step"] + 1)
        for j, k in enumerate(sync):
            group = groups[j] if j < len(groups) else "world"
            if group not in ("tp", "pp"):
                continue

            def fig(t, r):
                o = rows.get((t, r))
                if o is None or o.get("sync_wait_ns") is None or o["sync_wait_ns"][j] is None:
                    return None
                wait = o["sync_wait_ns"][j]
                return wait, o["d_ns"][k] + o["d_ns"][k + 1] - wait

            cohort = {r: [q for q in ranks if q != r and key_without(cs[q], ("dp", "ep")) ==
                          key_without(cs[r], ("dp", "ep"))] for r in ranks}

            def rel(t, r):
                f = fig(t, r)
                peers = [fig(t, q) for q in cohort[r]]
                peers = [x for x in peers if x is not None]
                if f is None:
                    return None
                if not peers:
                    return f
                return (f[0] - statistics.median(x[0] for x in peers),
                        f[1] - statistics.median(x[1] for x in peers))

            members = {}
            for r in ranks:
                members.setdefault(key_without(cs[r], (group,)), []).append(r)
            for mem in members.values():
                tops, elig = {}, 0
                for t in steps:
                    f = {r: rel(t, r) for r in mem}
                    if any(x is None for x in f.values()):
                        continue
                    top = max(mem, key=lambda r: f[r][1] - f[r][0])
                    if f[top][1] > tol:
                        elig += 1
                        tops[top] = tops.get(top, 0) + 1
                    if a.steps == w["index"]:
                        print("    step %d %s %s" % (t, "E" if f[top][1] > tol else " ", "  ".join(
                            "r%d wait %+7.1f own %+7.1f blame %+7.1f" % (
                                r, f[r][0] / 1e6, f[r][1] / 1e6, (f[r][1] - f[r][0]) / 1e6)
                            for r in mem)))
                print("  %s %s group %s: %d eligible, culprit %s" % (
                    stages[k], group, mem, elig,
                    ", ".join("r%d x%d" % kv for kv in sorted(tops.items()))))
            signs = []
            for r in ranks:
                more = less = 0
                for t in steps:
                    f = rel(t, r)
                    if f is not None and cohort[r]:
                        more += f[1] > tol
                        less += f[1] < -tol
                z = (more - less) / math.sqrt(more + less) if more + less else 0.0
                signs.append("r%d %d/%d z %.1f" % (r, more, less, z))
            print("  %s replica signs (above/below): %s" % (stages[k], "; ".join(signs)))


if __name__ == "__main__":
    main()
