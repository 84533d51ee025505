#!/usr/bin/python3
"""CI-sized communication-straggler check: a real 4-rank PyTorch DDP job
(Gloo, CPU) reports through the binding to a real sfd.

Rows (--row): backward_comm, one hidden rank's inner comm hook waits a
tenth of a clean step before it issues its all-reduce (the arrival is
marked before the wait, so the rank looks punctual): the window's
straggler must name it with origin communication. none: the clean job,
issue marks seen, no communication verdict. no_issue: the backward's
arrival marked by hand without the binding's hook (an old client): the
report must say that communication lateness cannot be seen. Exit 77
(CTest SKIP_RETURN_CODE) only when python3-torch with Gloo is absent.
"""

import argparse
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

import sfharness  # noqa: E402

SKIP = 77
WARMUP = 10
STEPS = 40
MAGNITUDE = 0.1


def fail(msg, window=None):
    print("FAIL: " + msg)
    if window is not None:
        print("  straggler %s" % window.get("straggler"))
        print("  communication %s" % window.get("communication"))
    return 1


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--row", required=True, choices=["backward_comm", "none", "no_issue"])
    p.add_argument("--seed", type=int, default=2)
    a = p.parse_args()
    if not sfharness.has_torch():
        print("SKIP: /usr/bin/python3 cannot import torch with Gloo (install python3-torch)")
        return SKIP
    build = sfharness.Build(a.build)
    fault = "backward_comm" if a.row == "backward_comm" else "none"
    mag = MAGNITUDE if fault != "none" else 0.0
    marks = "off" if a.row == "no_issue" else "on"
    job = "ci-comm-%s-%d" % (a.row, os.getpid())
    with sfharness.Sfd(build, warmup_steps=WARMUP, window_steps=STEPS) as sfd:
        res = sfharness.train(build, job, ["--ranks", "4", "--fault", fault, "--seed",
                                           str(a.seed), "--magnitude", str(mag), "--warmup",
                                           str(WARMUP), "--steps", str(STEPS),
                                           "--issue-marks", marks],
                              sf_socket=sfd.ingest, timeout=240)
        wins = sfd.windows(job, 1, timeout=60)
        text = sfd.report(job, human=True)
        print(text)
    w = [x for x in wins if x["window"]["index"] == 0 and
         "window_partial" not in (x.get("downgrade_reasons") or [])]
    if not w:
        return fail("no closed measured window in %r" % wins)
    w = w[0]
    if w["window"]["ranks"] != 4 or w["window"]["steps"] != STEPS:
        return fail("window covers %s ranks and %s steps" % (w["window"]["ranks"],
                                                            w["window"]["steps"]), w)
    comm, verdict = w["communication"], w.get("straggler")
    print("row %s, hidden rank %d, delay %.1f ms, straggler %s, communication %s" % (
        a.row, res["hidden_rank"], 1000 * res["delay_s"], verdict, comm))
    if a.row == "backward_comm":
        if comm["visibility"] != "seen" or comm["verdict"] is None or \
                comm["verdict"]["rank"] != res["hidden_rank"]:
            return fail("the communication verdict does not name hidden rank %d" %
                        res["hidden_rank"], w)
        if verdict is None or verdict["rank"] != res["hidden_rank"] or \
                verdict["origin"] != "communication":
            return fail("the window's straggler is not rank %d's communication" %
                        res["hidden_rank"], w)
        if "all-reduce in model.backward_cpu_wall started" not in text:
            return fail("the text view does not name the late all-reduce", w)
    elif a.row == "none":
        if comm["visibility"] != "seen" or comm["marked_rows"] != comm["rows"]:
            return fail("the clean job's issue marks are not all seen", w)
        if comm["verdict"] is not None or verdict is not None:
            return fail("the clean job has a verdict", w)
    else:
        if comm["visibility"] != "no_issue_marks" or comm["verdict"] is not None:
            return fail("without issue marks the report must say it cannot see", w)
        if "cannot be seen" not in text:
            return fail("the text view does not say that it cannot see", w)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
