#!/usr/bin/python3
"""CI-sized live check of the live verdict (docs/LIVE.md): a real 4-rank
PyTorch DDP job (Gloo, CPU) reports through the binding to a real sfd. The
live baseline is the job's first three windows; the fault is off in those and
in the fourth and on from the fifth window's first step, a known step. The
first live verdict must name the hidden rank, and the stage for a rank's own
work, within 10 steps of that step (or 30 s, whichever is later); the
no-fault row must carry no live verdict at all. backward_comm (the hidden
rank's inner comm hook waits before it issues its all-reduce, after an
on-time arrival) must be named on its communication: evidence test
"communication", stage and sync stage the backward; a fault in a rank's own
work never on its communication. Exit 77 (CTest
SKIP_RETURN_CODE) only when python3-torch with Gloo is absent.
"""

import argparse
import json
import os
import sys
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import faults  # noqa: E402
import sfharness  # noqa: E402

SKIP = 77
WARMUP, WINDOW, BASELINE = 6, 16, 3
PHASES = "A" * (BASELINE + 1) + "BB"
ONSET = WARMUP + (BASELINE + 1) * WINDOW  # first step of the first "B" window
BOUND_STEPS, BOUND_S = 10, 30.0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", required=True, choices=sorted(faults.FAULTS))
    p.add_argument("--seed", type=int, default=2)
    p.add_argument("--magnitude", type=float, default=0.5)
    a = p.parse_args()
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    stage = faults.FAULTS[a.row]
    mag = 0.0 if stage is None else a.magnitude
    job = "ci-live-%s-%d" % (a.row, os.getpid())
    keys = {"live_calibration_steps": BASELINE * WINDOW}
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=WINDOW, sfd_keys=keys) as sfd:
        res = sfharness.train(build, job, ["--ranks", "4", "--fault", a.row, "--seed",
                                           str(a.seed), "--magnitude", str(mag), "--warmup",
                                           str(WARMUP), "--steps", str(WINDOW * len(PHASES)),
                                           "--phases", PHASES],
                              sf_socket=sfd.ingest, timeout=240)
        sfd.windows(job, len(PHASES), timeout=60)
        r = sfd.sfctl("events", job, "--json")
        if r.returncode != 0:
            print("FAIL: sfctl events: rc %d: %s" % (r.returncode, r.stderr))
            return 1
        ev = json.loads(r.stdout)
        print(sfd.sfctl("events", job).stdout)
    starts = [e for e in ev["events"] if e["event"] == "start"]
    print("row %s, hidden rank %d, delay %.1f ms, median step %.1f ms, onset step %d" % (
        a.row, res["hidden_rank"], 1000 * res["delay_s"], 1000 * res["median_step_s"], ONSET))
    if not ev["calibrated"] or ev["steps_tested"] < (len(PHASES) - BASELINE) * WINDOW - 2:
        print("FAIL: the live test did not run: %s" % ev)
        return 1
    if stage is None:
        if starts:
            print("FAIL: the clean job carries live verdicts: %s" % starts)
            return 1
        print("PASS")
        return 0
    if not starts:
        print("FAIL: no live verdict")
        return 1
    v = starts[0]["verdict"]
    bound = max(BOUND_STEPS, int(BOUND_S / res["median_step_s"]))
    if v["detected_step"] < ONSET or v["detected_step"] >= ONSET + bound:
        print("FAIL: first verdict at step %d, onset %d, bound %d steps: %s" % (
            v["detected_step"], ONSET, bound, v))
        return 1
    if v["kind"] != "straggler" or v["rank"] != res["hidden_rank"]:
        print("FAIL: the verdict does not name rank %d: %s" % (res["hidden_rank"], v))
        return 1
    if v["stage"] != stage:
        print("FAIL: the verdict names stage %s, not %s" % (v["stage"], stage))
        return 1
    test = v["evidence"]["test"]
    if (test == "communication") != (a.row == "backward_comm"):
        print("FAIL: evidence test %r for row %s: %s" % (test, a.row, v))
        return 1
    if a.row == "backward_comm" and v["sync_stage"] != stage:
        print("FAIL: the communication verdict holds up %s, not %s" % (v["sync_stage"], stage))
        return 1
    print("named rank %d in %s (sync %s, test %s) at step %d, %d steps after the onset" % (
        v["rank"], v["stage"], v["sync_stage"], test, v["detected_step"],
        v["detected_step"] - ONSET))
    print("PASS")
    return 0


if __name__ == "__main__":
    t0 = time.time()
    rc = main()
    print("%.1f s" % (time.time() - t0))
    sys.exit(rc)
