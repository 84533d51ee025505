#!/usr/bin/python3
"""CI-sized DDP routing check: a real 4-rank PyTorch DDP job (Gloo, CPU)
reports through the binding to a real sfd in its own runtime directory.

One fault row per invocation (--row). With --check routing: a seeded fault
row must put its stage in the top two of the routing order; the no-fault
control must carry no strong label and must not route callbacks. With
--check verdict: the job marks its arrivals (the DDP comm hook, rec.sync()
around the callback barrier) and the window's straggler verdict must name
the hidden rank; the no-fault control must have no verdict. Exit 77 (CTest
SKIP_RETURN_CODE) only when python3-torch with Gloo is absent.
"""

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import faults  # noqa: E402
import routing  # noqa: E402
import sfharness  # noqa: E402

SKIP = 77
WARMUP = 10
STEPS = 40
# Large relative to the noise of 4 ranks sharing 2 busy cores.
MAGNITUDE = 1.5


def fail(msg, window=None):
    print("FAIL: " + msg)
    if window is not None:
        for u in routing.units(window):
            print("  %-26s advance %.4f s share %s" % (u["name"], u["advance_s"] or 0.0,
                                                      u.get("share")))
        print("  routing_set %s labels %s" % (window.get("routing_set"), window.get("labels")))
    return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", required=True, choices=sorted(faults.FAULTS))
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--check", default="routing,verdict",
                   help="comma-separated: routing, verdict")
    a = p.parse_args()
    checks = set(a.check.split(","))

    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    mag = 0.0 if a.row == "none" else MAGNITUDE
    job = "ci-%s-%d" % (a.row, os.getpid())
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=STEPS) as sfd:
        res = sfharness.train(build, job, ["--ranks", "4", "--fault", a.row, "--seed",
                                           str(a.seed), "--magnitude", str(mag), "--warmup",
                                           str(WARMUP), "--steps", str(STEPS)],
                              sf_socket=sfd.ingest, timeout=240)
        wins = sfd.windows(job, 1, timeout=60)
        print(sfd.report(job, human=True))
    w = [x for x in wins if x["window"]["index"] == 0 and
         "window_partial" not in (x.get("downgrade_reasons") or [])]
    if not w:
        return fail("no closed measured window in %r" % wins)
    w = w[0]
    if w["window"]["ranks"] != 4 or w["window"]["steps"] != STEPS:
        return fail("window covers %s ranks and %s steps, want 4 and %d" % (
            w["window"]["ranks"], w["window"]["steps"], STEPS), w)
    sc = routing.score(w, faults.FAULTS[a.row])["StageFrontier"]
    print("row %s, hidden rank %d, delay %.1f ms, routing order %s, routing set %s, labels %s" % (
        a.row, res["hidden_rank"], 1000 * res["delay_s"], sc["order"], sc["set"],
        w.get("labels")))
    verdict = w.get("straggler")
    print("straggler verdict %s" % verdict)
    if "verdict" in checks:
        if faults.FAULTS[a.row] is not None and (verdict is None or
                                                 verdict["rank"] != res["hidden_rank"]):
            return fail("the verdict %s does not name hidden rank %d" % (verdict,
                                                                        res["hidden_rank"]), w)
        if faults.FAULTS[a.row] is None and verdict is not None:
            return fail("the no-fault control has a verdict %s" % verdict, w)
        if w["counters"]["arrival_missing_steps"] != 0:
            return fail("steps without an arrival mark: %s" % w["counters"], w)
    if "routing" not in checks:
        pass
    elif faults.FAULTS[a.row] is not None:
        if not sc["top2"]:
            return fail("%s is not in the top two of the routing order" % faults.FAULTS[a.row], w)
    else:
        if routing.strong_labels(w):
            return fail("the no-fault control carries strong labels %s" %
                        routing.strong_labels(w), w)
        if "callbacks.cpu_wall" in sc["set"]:
            return fail("the control routes callbacks.cpu_wall", w)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
