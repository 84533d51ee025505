#!/usr/bin/python3
"""The real-workload evaluation: DDP fault matrix, baselines, A/B/A, scope
checks and overhead, against a real sfd. Prints markdown tables.

Owns the experiment plan and the tables. Jobs run through sfharness.py, and
every routing figure comes from the live report of sfd (routing.py scores
it). Raw windows go to --out (JSON Lines) so the tables can be rebuilt with
--tables-from without rerunning.

  /usr/bin/python3 bench/ddp/run_matrix.py --build build all --out ddp.jsonl
  /usr/bin/python3 bench/ddp/run_matrix.py --build build matrix --seeds 3
  /usr/bin/python3 bench/ddp/run_matrix.py --tables-from ddp.jsonl
  /usr/bin/python3 bench/ddp/run_matrix.py --build build verdict --out verdict.jsonl
"""

import argparse
import gzip
import json
import os
import random
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import faults  # noqa: E402
import routing  # noqa: E402
import sfharness  # noqa: E402

FAULT_ROWS = ["data_wait", "backward_compute", "backward_comm", "forward_host",
              "callback_barrier"]
CONTROL_ROWS = ["callback_host", "none"]


def log(msg):
    sys.stderr.write("[%s] %s\n" % (time.strftime("%H:%M:%S"), msg))
    sys.stderr.flush()


class Recorder(object):
    """Appends one JSON object per run to the --out file."""

    def __init__(self, path):
        self.path = path
        self.records = []

    def add(self, rec):
        self.records.append(rec)
        if self.path:
            with open(self.path, "a") as f:
                f.write(json.dumps(rec) + "\n")


def job_name(kind, *parts):
    return "%s-%s-%d" % (kind, "-".join(str(p) for p in parts), os.getpid())


def run_one(build, sfd, kind, fault, seed, mag, ranks, extra=(), steps=100, warmup=20,
            want_windows=1, tag=None):
    job = job_name(kind, fault, seed, mag, ranks, *[a.strip("-") for a in extra] +
                   ([tag] if tag else []))
    args = ["--ranks", str(ranks), "--fault", fault, "--seed", str(seed), "--magnitude",
            str(mag), "--warmup", str(warmup), "--steps", str(steps)] + list(extra)
    t0 = time.monotonic()
    res = sfharness.train(build, job, args, sf_socket=sfd.ingest, timeout=600)
    wins = sfd.windows(job, want_windows)
    log("%s %s seed %d mag %.2f ranks %d: %.1f s, hidden rank %d" %
        (kind, fault, seed, mag, ranks, time.monotonic() - t0, res["hidden_rank"]))
    return {"kind": kind, "fault": fault, "seed": seed, "magnitude": mag, "ranks": ranks,
            "extra": list(extra), "job": job, "result": res, "windows": [trim(w) for w in wins]}


KEEP = ("window", "exposed_total_s", "stages", "groups", "routing_set", "co_critical_stages",
        "labels", "downgrade_reasons", "suspect_ranks", "gates", "straggler", "critical_path",
        "counters", "communication")

# The straggler-verdict matrix (arrival points): every fault kind the verdict
# must localize, the communication-hook row, and the clean control.
VERDICT_ROWS = ["data_wait", "forward_host", "backward_compute", "backward_comm",
                "callback_barrier", "none"]


def trim(window):
    """The fields the tables use (the per-rank section is dropped)."""
    return {k: window[k] for k in KEEP if k in window}


def measured_window(rec, index=0):
    for w in rec["windows"]:
        if w["window"]["index"] == index and \
                "window_partial" not in (w.get("downgrade_reasons") or []):
            return w
    return None


# ---------------------------------------------------------------------------
# experiments

def do_matrix(build, out, a):
    with sfharness.Sfd(build, warmup_steps=20, window_steps=a.steps) as sfd:
        for ranks in a.ranks:
            for seed in a.seed_list or range(1, a.seeds + 1):
                for fault in a.rows:
                    mags = [0.0] if fault == "none" else a.magnitudes
                    for mag in mags:
                        try:
                            out.add(run_one(build, sfd, "matrix", fault, seed, mag, ranks,
                                            steps=a.steps))
                        except Exception as e:  # a failed run is a row, not an abort
                            log("FAILED %s seed %d mag %s ranks %d: %s" %
                                (fault, seed, mag, ranks, e))
                            out.add({"kind": "matrix", "fault": fault, "seed": seed,
                                     "magnitude": mag, "ranks": ranks, "error": str(e)})


def do_verdict(build, out, a):
    """Each job runs several windows; the clean row runs once per magnitude
    slot so that clean windows are as many as each fault's."""
    window = a.verdict_window
    # One sfd holds every job of the matrix (54 by default): past the
    # default per-uid job limit.
    limits = {"max_jobs": 256, "max_jobs_per_uid": 256}
    with sfharness.Sfd(build, warmup_steps=20, window_steps=window, limits=limits) as sfd:
        for seed in a.seed_list or range(1, a.seeds + 1):
            for mag in a.verdict_magnitudes:
                for fault in a.verdict_rows:
                    m = 0.0 if fault == "none" else mag
                    try:
                        # The clean row runs once per slot: a job id of its own
                        # each time, or sfd would take it for the first run's
                        # duplicate and answer with that run's windows.
                        rec = run_one(build, sfd, "verdict", fault, seed, m, 4,
                                      steps=window * a.verdict_windows,
                                      want_windows=a.verdict_windows,
                                      tag="slot%g" % mag if fault == "none" else None)
                        rec["slot"] = mag
                        if a.record_dir:
                            keep_recording(sfd, rec["job"], a.record_dir)
                        out.add(rec)
                    except Exception as e:  # a failed run is a row, not an abort
                        log("FAILED verdict %s seed %d mag %s: %s" % (fault, seed, m, e))
                        out.add({"kind": "verdict", "fault": fault, "seed": seed,
                                 "magnitude": m, "slot": mag, "error": str(e)})


def keep_recording(sfd, job, directory):
    """The job's rows as sfd fed them to the core (`sfctl record`), so that
    `sfctl replay` recomputes its windows offline under other gates."""
    os.makedirs(directory, exist_ok=True)
    r = sfd.sfctl("record", job, "-o", os.path.join(directory, job + ".jsonl"))
    if r.returncode != 0:
        raise RuntimeError("sfctl record %s: %s" % (job, r.stderr.strip()))


def do_aba(build, out, a):
    per = 60
    with sfharness.Sfd(build, warmup_steps=20, window_steps=per) as sfd:
        for fault in ["data_wait", "callback_barrier"]:
            for seed in range(1, a.aba_seeds + 1):
                out.add(run_one(build, sfd, "aba", fault, seed, 1.0, 4, extra=["--phases", "ABA"],
                                steps=3 * per, want_windows=3))


def do_scope(build, out, a):
    with sfharness.Sfd(build, warmup_steps=20, window_steps=a.steps) as sfd:
        for fault in ["data_wait", "backward_comm", "callback_host", "none"]:
            for seed in range(1, a.scope_seeds + 1):
                mag = 0.0 if fault == "none" else 0.5
                out.add(run_one(build, sfd, "accum4", fault, seed, mag, 4,
                                extra=["--accumulation", "4"], steps=a.steps))
                out.add(run_one(build, sfd, "zero", fault, seed, mag, 4, extra=["--zero"],
                                steps=a.steps))


def do_overhead(build, out, a):
    nosfd_dir = tempfile.mkdtemp(prefix="sf-nosfd-")
    absent = os.path.join(nosfd_dir, "ingest.sock")   # nothing listens here
    settings = ["off", "on_sfd", "on_nosfd"]
    with sfharness.Sfd(build, warmup_steps=20, window_steps=a.overhead_steps) as sfd:
        for block in range(a.blocks):
            # Rotate the order inside each block so no setting always runs
            # first (page cache, thermal and neighbour drift cancel out).
            order = settings[block % 3:] + settings[:block % 3]
            thr = {}
            for s in order:
                job = job_name("ovh", block, s)
                args = ["--ranks", str(a.overhead_ranks), "--steps", str(a.overhead_steps),
                        "--instrument", "off" if s == "off" else "on"]
                sock = sfd.ingest if s == "on_sfd" else absent
                res = sfharness.train(build, job, args, sf_socket=sock)
                thr[s] = res["steps_per_s"]
            log("overhead block %d: %s" % (block, ", ".join("%s %.2f" % (k, thr[k])
                                                              for k in settings)))
            out.add({"kind": "overhead", "block": block, "order": order, "steps_per_s": thr,
                     "ranks": a.overhead_ranks, "steps": a.overhead_steps})
    os.rmdir(nosfd_dir)


def do_interleaved(build, out, a):
    """Overhead inside one job: blocks rotate the three settings (train.py
    --interleave), so the pairs share process placement and neighbours."""
    nosfd_dir = tempfile.mkdtemp(prefix="sf-nosfd-")
    absent = os.path.join(nosfd_dir, "ingest.sock")
    with sfharness.Sfd(build, warmup_steps=20, window_steps=100) as sfd:
        for run in range(a.interleaved_runs):
            job = job_name("ovi", run)
            steps = 3 * a.interleaved_triples * a.block_steps
            args = ["--ranks", str(a.overhead_ranks), "--steps", str(steps), "--interleave",
                    str(a.block_steps), "--absent-socket", absent]
            res = sfharness.train(build, job, args, sf_socket=sfd.ingest, timeout=600)
            log("interleaved run %d: %d blocks" % (run, len(res["blocks"])))
            out.add({"kind": "interleaved", "run": run, "ranks": a.overhead_ranks,
                     "block_steps": a.block_steps, "blocks": res["blocks"]})
    os.rmdir(nosfd_dir)


def do_stepcost(build, out, a):
    """The binding's own cost per training step (step_cost.py), next to sfd."""
    import subprocess
    with sfharness.Sfd(build) as sfd:
        r = subprocess.run([sfharness.PYTHON, os.path.join(HERE, "step_cost.py")],
                           env=build.env({"SF_SOCKET": sfd.ingest}), stdout=subprocess.PIPE,
                           universal_newlines=True, timeout=600, check=True)
    res = json.loads(r.stdout)
    log("step cost: %s" % res)
    out.add({"kind": "stepcost", "result": res})


# ---------------------------------------------------------------------------
# tables

def pct(k, n):
    return "%d/%d" % (k, n) if n else "-"


def tables_matrix(recs):
    lines = []
    runs = [r for r in recs if r.get("kind") == "matrix"]
    cell = lambda r: (r["fault"], r["seed"], r["magnitude"], r["ranks"])  # noqa: E731
    done = {cell(r) for r in runs if "error" not in r}
    # A failed cell that a later rerun filled is not a failure of the matrix.
    failed = [r for r in runs if "error" in r and cell(r) not in done]
    ok = [r for r in runs if "error" not in r and measured_window(r)]
    if not runs:
        return lines
    fault_runs = [r for r in ok if r["fault"] in FAULT_ROWS]
    for ranks in sorted({r["ranks"] for r in ok}):
        sub = [r for r in fault_runs if r["ranks"] == ranks]
        outs = [routing.score(measured_window(r), faults.FAULTS[r["fault"]],
                              routing.tau_of(measured_window(r))) for r in sub]
        lines.append("")
        lines.append("**Table 4, %d ranks** (all sync-bounded fault rows, all magnitudes and seeds)"
                     % ranks)
        lines.append("")
        lines += routing.table4(outs)
    for ranks in sorted({r["ranks"] for r in ok}):
        mags = sorted({r["magnitude"] for r in fault_runs if r["ranks"] == ranks})
        for mag in mags:
            sub = [r for r in fault_runs if r["ranks"] == ranks and r["magnitude"] == mag]
            outs = [routing.score(measured_window(r), faults.FAULTS[r["fault"]],
                                  routing.tau_of(measured_window(r))) for r in sub]
            lines.append("")
            lines.append("**Table 4, %d ranks, magnitude %.2f x median step**" % (ranks, mag))
            lines.append("")
            lines += routing.table4(outs)
    lines.append("")
    lines.append("**StageFrontier per row** (top-1 / top-2 / candidate hit over seeds; share of "
                 "the seeded stage, mean; labels seen)")
    lines.append("")
    lines.append("| ranks | row | magnitude | runs | top-1 | top-2 | hit | mean set | seeded share "
                 "| first two routed | labels |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|")
    for ranks in sorted({r["ranks"] for r in ok}):
        for fault in FAULT_ROWS:
            for mag in sorted({r["magnitude"] for r in fault_runs if r["fault"] == fault}):
                sub = [r for r in fault_runs if r["ranks"] == ranks and r["fault"] == fault
                       and r["magnitude"] == mag]
                if not sub:
                    continue
                exp = faults.FAULTS[fault]
                sc = [routing.score(measured_window(r), exp)["StageFrontier"] for r in sub]
                ws = [measured_window(r) for r in sub]
                shares = [routing.share(w, routing.group_of(w, exp)) for w in ws]
                leads = _counts("%s > %s" % (_short(s["order"][0]), _short(s["order"][1]))
                                for s in sc)
                labels = _counts(l for w in ws for l in w.get("labels", []))
                lines.append("| %d | %s | %.2f | %d | %s | %s | %s | %.1f | %.2f | %s | %s |" % (
                    ranks, fault, mag, len(sub), pct(sum(s["top1"] for s in sc), len(sc)),
                    pct(sum(s["top2"] for s in sc), len(sc)),
                    pct(sum(s["hit"] for s in sc), len(sc)),
                    statistics.mean(s["size"] for s in sc), statistics.mean(shares), leads,
                    labels))
    lines += tables_shares(ok)
    lines += tables_controls(ok)
    if failed:
        lines.append("")
        lines.append("Failed runs: " + "; ".join("%s seed %s mag %s ranks %s: %s" % (
            r["fault"], r["seed"], r["magnitude"], r["ranks"], r["error"][:120]) for r in failed))
    return lines


def _short(name):
    return name.split(".")[0] if not name.startswith("model.") else name.split(".")[1].split("_")[0]


def _counts(items):
    c = {}
    for i in items:
        c[i] = c.get(i, 0) + 1
    return ", ".join("%s x%d" % (k, v) for k, v in sorted(c.items(), key=lambda kv: -kv[1]))


SHARE_COLS = ["data.next_wait", "model.fwd_loss_cpu_wall", "model.backward_cpu_wall",
              "callbacks.cpu_wall"]


def tables_shares(ok):
    """Where the window's time went, per row: the data that explains misses."""
    lines = ["", "**Where the time went** (mean over seeds: window share per stage; the seeded "
             "stage's advance over the injected delay summed over the window's steps; mean "
             "exposed step; clean median step; delay)", "",
             "| ranks | row | magnitude | data | fwd | bwd | callbacks | seeded advance / "
             "injected | exposed step (ms) | median step (ms) | delay (ms) |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    cells = {}
    for r in ok:
        cells.setdefault((r["ranks"], r["fault"], r["magnitude"]), []).append(r)
    for (ranks, fault, mag) in sorted(cells, key=lambda k: (k[0], (FAULT_ROWS + CONTROL_ROWS)
                                                           .index(k[1]), k[2])):
        rs = cells[(ranks, fault, mag)]
        ws = [measured_window(r) for r in rs]
        sh = [statistics.mean(routing.share(w, c) for w in ws) for c in SHARE_COLS]
        exp = faults.FAULTS[fault]
        ratio = "-"
        if exp is not None:
            vals = []
            for r, w in zip(rs, ws):
                adv = [u["advance_s"] for u in routing.units(w)
                       if u["name"] == routing.group_of(w, exp)][0]
                vals.append(adv / (w["window"]["steps"] * r["result"]["delay_s"]))
            ratio = "%.2f" % statistics.mean(vals)
        lines.append("| %d | %s | %.2f | %s | %s | %.1f | %.1f | %.1f |" % (
            ranks, fault, mag, " | ".join("%.2f" % x for x in sh), ratio,
            statistics.mean(1000 * w["exposed_total_s"] / w["window"]["steps"] for w in ws),
            statistics.mean(1000 * r["result"]["median_step_s"] for r in rs),
            statistics.mean(1000 * r["result"]["delay_s"] for r in rs)))
    return lines


def tables_controls(ok):
    lines = ["", "**Controls.** callback_host: runs where `callbacks.cpu_wall` enters the "
             "candidate set, per method (StageFrontier: its routing set). none: runs with a "
             "strong label (direct_exposure, sync_wait_dependent, likely_sync_wait).", "",
             "| ranks | row | magnitude | runs | " +
             " | ".join(m for m, _ in routing.METHODS) + " | strong labels | routing set(s) |",
             "|---|---|---|---|" + "---|" * len(routing.METHODS) + "---|---|"]
    for ranks in sorted({r["ranks"] for r in ok}):
        for fault in CONTROL_ROWS:
            for mag in sorted({r["magnitude"] for r in ok if r["fault"] == fault}):
                sub = [r for r in ok if r["ranks"] == ranks and r["fault"] == fault
                       and r["magnitude"] == mag]
                if not sub:
                    continue
                ws = [measured_window(r) for r in sub]
                cells = []
                for m, _ in routing.METHODS:
                    n = sum("callbacks.cpu_wall" in routing.score(w, None)[m]["set"] for w in ws)
                    cells.append(pct(n, len(ws)))
                strong = sum(bool(routing.strong_labels(w)) for w in ws)
                sets = _counts("{" + ", ".join(w.get("routing_set", [])) + "}" for w in ws)
                lines.append("| %d | %s | %.2f | %d | %s | %s | %s |" % (
                    ranks, fault, mag, len(sub), " | ".join(cells), pct(strong, len(ws)), sets))
    return lines


def tables_aba(recs):
    runs = [r for r in recs if r.get("kind") == "aba"]
    if not runs:
        return []
    lines = ["", "**A/B/A removed-injection check** (4 ranks, magnitude 1.0, 60-step windows: "
             "A = fault off, B = on, A = off)", "",
             "| row | seed | window | phase | mean exposed step (ms) | seeded-stage share | "
             "routing set | labels |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        exp = faults.FAULTS[r["fault"]]
        for i, phase in enumerate("ABA"):
            w = measured_window(r, i)
            if w is None:
                lines.append("| %s | %d | %d | %s | missing | | | |" % (r["fault"], r["seed"], i,
                                                                      phase))
                continue
            steps = w["window"]["steps"] or 1
            lines.append("| %s | %d | %d | %s | %.1f | %.2f | %s | %s |" % (
                r["fault"], r["seed"], i, phase, 1000.0 * w["exposed_total_s"] / steps,
                routing.share(w, routing.group_of(w, exp)), ", ".join(w.get("routing_set", [])),
                ", ".join(w.get("labels", []))))
    return lines


def tables_scope(recs):
    runs = [r for r in recs if r.get("kind") in ("accum4", "zero")]
    if not runs:
        return []
    lines = ["", "**Scope checks** (4 ranks, magnitude 0.5; accum4 = gradient accumulation "
             "factor 4 with no_sync and @k stages, figures per reporting group; zero = "
             "ZeroRedundancyOptimizer)", "",
             "| setting | row | seed | routing order (top 3) | routing set | seeded top-2 | "
             "callbacks routed | labels |", "|---|---|---|---|---|---|---|---|"]
    for r in runs:
        w = measured_window(r)
        if w is None:
            lines.append("| %s | %s | %d | missing window | | | | |" % (r["kind"], r["fault"],
                                                                       r["seed"]))
            continue
        exp = faults.FAULTS.get(r["fault"])
        sc = routing.score(w, exp)["StageFrontier"]
        lines.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
            r["kind"], r["fault"], r["seed"], ", ".join(sc["order"][:3]),
            ", ".join(sc["set"]), "-" if exp is None else ("yes" if sc["top2"] else "NO"),
            "yes" if "callbacks.cpu_wall" in sc["set"] else "no",
            ", ".join(w.get("labels", []))))
    return lines


def bootstrap_ci(xs, iters=10000, seed=7):
    rng = random.Random(seed)
    n = len(xs)
    means = sorted(sum(rng.choice(xs) for _ in range(n)) / n for _ in range(iters))
    return means[int(0.025 * iters)], means[int(0.975 * iters) - 1]


def tables_overhead(recs):
    blocks = [r for r in recs if r.get("kind") == "overhead"]
    if not blocks:
        return []
    lines = ["", "**Overhead** (%d paired blocks, %d ranks, %d measured steps per run; "
             "throughput = measured steps / wall time on rank 0)" % (
                 len(blocks), blocks[0]["ranks"], blocks[0]["steps"]), "",
             "| setting | mean steps/s | throughput ratio vs off (mean of paired blocks) | "
             "bootstrap 95 % CI | overhead (point) |", "|---|---|---|---|---|"]
    off = [b["steps_per_s"]["off"] for b in blocks]
    lines.append("| off | %.2f | 1 | | |" % statistics.mean(off))
    for s in ("on_sfd", "on_nosfd"):
        ratios = [b["steps_per_s"][s] / b["steps_per_s"]["off"] for b in blocks]
        lo, hi = bootstrap_ci(ratios)
        m = statistics.mean(ratios)
        lines.append("| %s | %.2f | %.4f | [%.4f, %.4f] | %.2f %% |" % (
            s, statistics.mean(b["steps_per_s"][s] for b in blocks), m, lo, hi,
            100.0 * (1.0 - m)))
    return lines


def tables_interleaved(recs):
    runs = [r for r in recs if r.get("kind") == "interleaved"]
    if not runs:
        return []
    # One pair unit = one triple of adjacent blocks (off, on_sfd, on_nosfd in
    # rotated order) inside one run.
    triples = []
    for r in runs:
        bl = r["blocks"]
        for i in range(0, len(bl) - 2, 3):
            t = {b["setting"]: b["steps"] / b["elapsed_s"] for b in bl[i:i + 3]}
            if len(t) == 3:
                triples.append(t)
    lines = ["", "**Overhead, interleaved in one job** (%d runs, %d ranks, %d triples of "
             "%d-step blocks; each triple runs off, on with sfd and on without sfd "
             "back to back in rotated order)" % (len(runs), runs[0]["ranks"], len(triples),
                                                 runs[0]["block_steps"]), "",
             "| setting | mean steps/s | throughput ratio vs off (mean of paired triples) | "
             "bootstrap 95 % CI | overhead (point) |", "|---|---|---|---|---|"]
    lines.append("| off | %.2f | 1 | | |" % statistics.mean(t["off"] for t in triples))
    for s in ("on_sfd", "on_nosfd"):
        ratios = [t[s] / t["off"] for t in triples]
        lo, hi = bootstrap_ci(ratios)
        m = statistics.mean(ratios)
        lines.append("| %s | %.2f | %.4f | [%.4f, %.4f] | %.2f %% |" % (
            s, statistics.mean(t[s] for t in triples), m, lo, hi, 100.0 * (1.0 - m)))
    return lines


def tables_stepcost(recs):
    runs = [r["result"] for r in recs if r.get("kind") == "stepcost"]
    if not runs:
        return []
    res = runs[-1]
    # The job's step time from the same file's clean or overhead runs, if any.
    steps = [1.0 / b["steps_per_s"]["off"] for b in recs if b.get("kind") == "overhead"]
    steps += [b["elapsed_s"] / b["steps"] for r in recs if r.get("kind") == "interleaved"
              for b in r["blocks"] if b["setting"] == "off"]
    step_s = statistics.median(steps) if steps else None
    lines = ["", "**Instrumentation cost per step, measured alone** (step_cost.py: the job's "
             "per-step binding calls in a tight loop, %d iterations per setting, median of "
             "rounds; records sent %s, dropped %s)" % (res["iterations"], res["sent"],
                                                       res["dropped"]), "",
             "| setting | us per step | added us per step | share of the job's median step "
             "(%s) |" % ("%.1f ms" % (1000 * step_s) if step_s else "n/a"),
             "|---|---|---|---|"]
    for s in ("off", "on_sfd", "on_nosfd"):
        add = res[s] - res["off"]
        lines.append("| %s | %.2f | %.2f | %s |" % (
            s, 1e6 * res[s], 1e6 * add,
            "%.4f %%" % (100.0 * add / step_s) if step_s else "n/a"))
    return lines


def verdict_windows(r):
    """The run's complete measured windows."""
    return [w for w in r.get("windows", [])
            if w["window"]["index"] >= 0 and w["window"]["ranks"] == r["ranks"] and
            "window_partial" not in (w.get("downgrade_reasons") or [])]


def tables_verdict(recs):
    runs = [r for r in recs if r.get("kind") == "verdict" and "error" not in r]
    if not runs:
        return []
    lines = ["", "**Straggler verdict per window** (4 ranks; hit: the verdict names the hidden "
             "rank; false: a verdict on a clean window; origin: the verdict's origin stage "
             "is the faulted stage)", "",
             "| row | magnitude | runs | windows | hit | wrong rank | no verdict | origin ok "
             "| median lateness / delay | fixed | backward sync_wait share |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for fault in VERDICT_ROWS:
        for mag in sorted({r["magnitude"] for r in runs if r["fault"] == fault}):
            sub = [r for r in runs if r["fault"] == fault and r["magnitude"] == mag]
            ws = [(r, w) for r in sub for w in verdict_windows(r)]
            if not ws:
                continue
            hidden = lambda r: r["result"]["hidden_rank"]  # noqa: E731
            v = [(r, w["straggler"]) for r, w in ws]
            hit = sum(1 for r, s in v if s and s["rank"] == hidden(r))
            wrong = sum(1 for r, s in v if s and s["rank"] != hidden(r))
            none = sum(1 for _, s in v if not s)
            exp = faults.FAULTS[fault]
            origin = sum(1 for r, s in v if s and s["rank"] == hidden(r) and exp and
                         s["origin_stage"] == exp)
            fixed = sum(1 for _, s in v if s and s["persistence"] == "fixed")
            ratio = [s["median_lateness_s"] / r["result"]["delay_s"] for r, s in v
                     if s and s["rank"] == hidden(r) and r["result"]["delay_s"] > 0]
            waits = [u.get("share") for _, w in ws for u in w["stages"]
                     if u["name"] == "model.backward_cpu_wall.sync_wait"]
            waits = [x for x in waits if x is not None]
            lines.append("| %s | %.2f | %d | %d | %s | %s | %s | %s | %s | %s | %s |" % (
                fault, mag, len(sub), len(ws),
                pct(hit, len(ws)) if exp else "-",
                pct(wrong, len(ws)) if exp else "false %s" % pct(wrong + hit, len(ws)),
                pct(none, len(ws)), pct(origin, hit) if exp and hit else "-",
                "%.2f" % statistics.median(ratio) if ratio else "-", pct(fixed, len(ws)),
                "%.2f" % statistics.mean(waits) if waits else "-"))
    clean = [w for r in runs if r["fault"] == "none" for w in verdict_windows(r)]
    false = sum(1 for w in clean if w.get("straggler"))
    lines.append("")
    lines.append("Clean windows with a verdict: %d of %d (%s)." % (false, len(clean),
                                                                   pct(false, len(clean))))
    lines += verdict_summary(runs)
    lines += comm_summary(runs)
    return lines


def comm_summary(runs):
    """The communication verdict (issue marks): per row and magnitude, the
    windows whose verdict names the hidden rank with communication as its
    origin (backward_comm), and the windows of every other row, clean
    included, with any communication verdict (false alarms)."""
    lines = ["", "**Communication verdict per window** (hit: the window's straggler is the "
             "hidden rank with origin communication; false: a communication verdict on a "
             "window of another row)", "",
             "| row | magnitude | windows | hit | false | median issue lag / delay |",
             "|---|---|---|---|---|---|"]
    hidden = lambda r: r["result"]["hidden_rank"]  # noqa: E731
    for fault in VERDICT_ROWS:
        for mag in sorted({r["magnitude"] for r in runs if r["fault"] == fault}):
            ws = [(r, w) for r in runs if r["fault"] == fault and r["magnitude"] == mag
                  for w in verdict_windows(r) if "communication" in w]
            if not ws:
                continue
            comm = [(r, w["communication"]["verdict"], w.get("straggler")) for r, w in ws]
            if fault == "backward_comm":
                hit = sum(1 for r, c, s in comm if s and s["rank"] == hidden(r) and
                          s.get("origin") == "communication")
                ratio = [c["median_issue_lag_s"] / r["result"]["delay_s"] for r, c, _ in comm
                         if c and c["rank"] == hidden(r) and r["result"]["delay_s"] > 0]
                lines.append("| %s | %.2f | %d | %s | - | %s |" % (
                    fault, mag, len(ws), share(hit, len(ws)),
                    "%.2f" % statistics.median(ratio) if ratio else "-"))
            else:
                false = sum(1 for _, c, _ in comm if c)
                lines.append("| %s | %.2f | %d | - | %s | - |" % (fault, mag, len(ws),
                                                                  share(false, len(ws))))
    return lines


# The rows the 95 % target covers (a fault in the rank's own work).
VERDICT_TARGET_ROWS = ["data_wait", "forward_host", "backward_compute", "callback_barrier"]


def verdict_summary(runs):
    """Per magnitude: the target rows' hit rate, beside the clean windows run
    in the same magnitude slot."""
    lines = ["", "| magnitude | target rows: hit | wrong rank | no verdict | clean windows of "
             "the same slot with a verdict |", "|---|---|---|---|---|"]
    for mag in sorted({r["slot"] for r in runs if "slot" in r}):
        ws = [(r, w) for r in runs if r.get("slot") == mag and r["fault"] in VERDICT_TARGET_ROWS
              for w in verdict_windows(r)]
        clean = [w for r in runs if r.get("slot") == mag and r["fault"] == "none"
                 for w in verdict_windows(r)]
        hidden = lambda r: r["result"]["hidden_rank"]  # noqa: E731
        hit = sum(1 for r, w in ws if w["straggler"] and w["straggler"]["rank"] == hidden(r))
        wrong = sum(1 for r, w in ws if w["straggler"] and w["straggler"]["rank"] != hidden(r))
        none = sum(1 for _, w in ws if not w["straggler"])
        false = sum(1 for w in clean if w.get("straggler"))
        lines.append("| %.2f | %s | %s | %s | %s |" % (mag, share(hit, len(ws)),
                                                      share(wrong, len(ws)), share(none, len(ws)),
                                                      share(false, len(clean))))
    return lines


def share(k, n):
    return "%d/%d (%.0f %%)" % (k, n, 100.0 * k / n) if n else "-"


def all_tables(recs):
    return (tables_matrix(recs) + tables_aba(recs) + tables_scope(recs) +
            tables_overhead(recs) + tables_interleaved(recs) + tables_stepcost(recs) +
            tables_verdict(recs))


def main():
    p = argparse.ArgumentParser(description="DDP fault matrix against a real sfd")
    p.add_argument("what", nargs="?", default="all",
                   choices=["all", "matrix", "aba", "scope", "overhead", "interleaved",
                            "stepcost", "verdict"])
    p.add_argument("--build", default=os.environ.get("SF_BUILD_DIR", "build"))
    p.add_argument("--out", default=None, help="append raw runs here (JSON Lines)")
    p.add_argument("--tables-from", default=None, help="print tables from a JSON Lines file")
    p.add_argument("--ranks", type=int, nargs="+", default=[4, 8])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--seed-list", type=int, nargs="+", default=None,
                   help="exact seeds (overrides --seeds), e.g. to rerun failed cells")
    p.add_argument("--rows", nargs="+", default=FAULT_ROWS + CONTROL_ROWS,
                   choices=FAULT_ROWS + CONTROL_ROWS)
    p.add_argument("--magnitudes", type=float, nargs="+", default=[0.2, 0.5, 1.0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--verdict-rows", nargs="+", default=VERDICT_ROWS, choices=VERDICT_ROWS)
    p.add_argument("--verdict-magnitudes", type=float, nargs="+", default=[0.1, 0.25, 0.5])
    p.add_argument("--verdict-window", type=int, default=40, help="steps per window")
    p.add_argument("--verdict-windows", type=int, default=3, help="windows per job")
    p.add_argument("--record-dir", default=None,
                   help="keep each verdict job's `sfctl record` recording here")
    p.add_argument("--aba-seeds", type=int, default=2)
    p.add_argument("--scope-seeds", type=int, default=2)
    p.add_argument("--blocks", type=int, default=8)
    p.add_argument("--overhead-ranks", type=int, default=4)
    p.add_argument("--overhead-steps", type=int, default=200)
    p.add_argument("--interleaved-runs", type=int, default=3)
    p.add_argument("--interleaved-triples", type=int, default=10)
    p.add_argument("--block-steps", type=int, default=20)
    a = p.parse_args()

    if a.tables_from:
        opener = gzip.open if a.tables_from.endswith(".gz") else open
        with opener(a.tables_from, "rt") as f:
            recs = [json.loads(l) for l in f if l.strip()]
        print("\n".join(all_tables(recs)))
        return 0
    if not sfharness.has_torch():
        log("python3-torch (with Gloo) is not importable by /usr/bin/python3; nothing to run")
        return 77
    build = sfharness.Build(a.build)
    out = Recorder(a.out)
    t0 = time.monotonic()
    steps = {"matrix": do_matrix, "aba": do_aba, "scope": do_scope, "overhead": do_overhead,
             "interleaved": do_interleaved, "stepcost": do_stepcost, "verdict": do_verdict}
    for name in (["matrix", "aba", "scope", "overhead", "interleaved", "stepcost"]
                 if a.what == "all"
                 else [a.what]):
        log("== %s" % name)
        steps[name](build, out, a)
    log("total %.0f s" % (time.monotonic() - t0))
    print("\n".join(all_tables(out.records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
