#!/usr/bin/python3
"""Cross-check of `sfctl import kineto` against the live report.

A real 4-rank PyTorch DDP job (Gloo, CPU) with a fault on a hidden rank
reports live to a real sfd through the binding while torch.profiler (CPU)
traces every rank. The import of those traces, replayed with the same gates,
must route the same top stage and name the same suspect rank as sfd's live
report of the same steps; the shares of both reports are printed side by
side (docs/EVALUATION.md, "Cross-checks"). Exit 77 (CTest SKIP_RETURN_CODE)
only when python3-torch with Gloo is absent.
"""

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import faults  # noqa: E402
import routing  # noqa: E402
import sfharness  # noqa: E402

SKIP = 77
# CI-sized by default: profiling every op under the sanitizers is the cost.
WARMUP = 6
STEPS = 16
MAGNITUDE = 1.5
# A smaller batch than the routing tests: the profiler records every op of
# the data pipeline, and the traces (about 40 MB a rank at batch 8, 50
# steps) would dominate a CI run.


def measured(wins):
    w = [x for x in wins if x["window"]["index"] == 0 and
         "window_partial" not in (x.get("downgrade_reasons") or [])]
    return w[0] if w else None


def top_stage(w):
    order = w.get("routing_order") or []
    return order[0] if order else None


def suspect(w):
    s = w.get("suspect_ranks") or []
    return s[0]["rank"] if s else None


def import_traces(build, trace_dir, warmup, steps):
    files = sorted(os.path.join(trace_dir, f) for f in os.listdir(trace_dir))
    r = subprocess.run([build.sfctl, "import", "kineto", "--rank-from", r"rank([0-9]+)",
                        "--replay", "--json", "--warmup-steps", str(warmup), "--window-steps",
                        str(steps)] + files, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=120)
    sys.stdout.write(r.stderr)
    if r.returncode != 0:
        raise RuntimeError("sfctl import kineto: rc %d" % r.returncode)
    return json.loads(r.stdout)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", default="data_wait", choices=sorted(faults.FAULTS))
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--warmup", type=int, default=WARMUP)
    p.add_argument("--steps", type=int, default=STEPS)
    a = p.parse_args()
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    job = "import-%s-%d" % (a.row, os.getpid())
    traces = tempfile.mkdtemp(prefix="sf-import-ddp-")
    t0 = time.perf_counter()
    try:
        with sfharness.Sfd(build, warmup_steps=a.warmup, window_steps=a.steps) as sfd:
            res = sfharness.train(build, job, ["--ranks", "4", "--fault", a.row, "--seed",
                                               str(a.seed), "--magnitude", str(MAGNITUDE),
                                               "--warmup", str(a.warmup), "--steps", str(a.steps),
                                               "--batch", "4", "--seq", "16",
                                               "--profile", traces],
                                  sf_socket=sfd.ingest, timeout=240)
            live = measured(sfd.windows(job, 1, timeout=60))
        # One trace gzipped, as torch.profiler writes "*.json.gz": both read.
        with open(os.path.join(traces, "rank1.json"), "rb") as src, \
                gzip.open(os.path.join(traces, "rank1.json.gz"), "wb", 1) as dst:
            shutil.copyfileobj(src, dst)
        os.unlink(os.path.join(traces, "rank1.json"))
        t1 = time.perf_counter()
        imported = measured(import_traces(build, traces, a.warmup, a.steps))
        print("job %.1f s, import %.1f s" % (t1 - t0, time.perf_counter() - t1))
    finally:
        shutil.rmtree(traces, ignore_errors=True)
    if live is None or imported is None:
        print("FAIL: no closed measured window (live %s, import %s)" % (live is not None,
                                                                        imported is not None))
        return 1
    print("row %s, hidden rank %d, delay %.1f ms" % (a.row, res["hidden_rank"],
                                                    1000 * res["delay_s"]))
    print("%-26s %10s %10s" % ("stage", "live", "import"))
    for u in routing.units(live):
        print("%-26s %10s %10s" % (u["name"], u.get("share"),
                                   routing.share(imported, u["name"])))
    gap = max(abs(routing.share(live, u["name"]) - routing.share(imported, u["name"]))
              for u in routing.units(live))
    print("exposed: live %.3f s, import %.3f s; largest share gap %.4f" % (
        live["exposed_total_s"], imported["exposed_total_s"], gap))
    print("top stage: live %s, import %s; suspect rank: live %s, import %s" % (
        top_stage(live), top_stage(imported), suspect(live), suspect(imported)))
    if imported["window"]["ranks"] != 4 or imported["window"]["steps"] != a.steps:
        print("FAIL: the import covers %s ranks and %s steps, want 4 and %d" % (
            imported["window"]["ranks"], imported["window"]["steps"], a.steps))
        return 1
    if top_stage(live) is None or top_stage(live) != top_stage(imported):
        print("FAIL: the import routes a different top stage")
        return 1
    if suspect(live) is None or suspect(live) != suspect(imported):
        print("FAIL: the import names a different suspect rank")
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
