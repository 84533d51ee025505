#!/usr/bin/python3
"""Detection of the live verdict (docs/LIVE.md) offline, through the core, on
the real fault recordings of the change matrix (bench/ddp/results/
change_w100*recordings.tar.xz: 4-rank DDP jobs on Gloo, the hidden rank
slowed in its last two or four 100-step windows). For each recording of the rows and
magnitude asked, the hidden rank comes from the job's seed (faults.py), the
onset from its windows (the first step of the first faulty window), and
live_detect_replay replays it (baseline from the first complete steps, as
sfd). Prints the tool's lines, then per row the hits (right rank and stage)
within 10 and 30 steps of the onset and the median delay. Options after `--`
go to live_detect_replay (e.g. -- --shift-sigmas 2).

usage: detect_replay.py [--build DIR] [--rows forward_host ...] [--magnitude 0.1]
                        [--recordings DIR] [-- TOOL OPTIONS]
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
import tempfile

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "bench", "ddp"))

# The recordings' first faulty window by their number of windows: the
# change matrix's plain runs (3 baseline + 2 faulty) and its --clean-before 2
# --faulty 4 runs (results/change_w100_*_live.jsonl.gz say fault_from).
FAULT_FROM = {5: 3, 9: 5}
ROWS = ["data_wait", "forward_host", "backward_compute", "callback_barrier"]
STAGES = {"data_wait": "data.next_wait", "forward_host": "model.fwd_loss_cpu_wall",
          "backward_compute": "model.backward_cpu_wall", "callback_barrier": "callbacks.cpu_wall"}


def hidden_rank(seed, world):
    """faults.faulty_rank without importing torch."""
    import random
    return random.Random("sf-hidden-rank-%d" % seed).randrange(world)


def spec(path, row):
    world, windows = None, []
    with open(path) as f:
        for line in f:
            if '"row"' in line[:20]:
                continue
            o = json.loads(line)
            if o["type"] == "header":
                world = o["world_size"]
            elif o["type"] == "window":
                windows.append(o["first_step"])
    seed = int(os.path.basename(path).split("-")[-2])
    onset = sorted(windows)[FAULT_FROM[len(windows)]]
    return "%d:%s:%d:%s" % (hidden_rank(seed, world), STAGES[row], onset, path)


def main():
    argv = sys.argv[1:]
    tool_args = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(REPO, "build-rel"))
    p.add_argument("--rows", nargs="+", default=ROWS)
    p.add_argument("--magnitude", default="0.1")
    p.add_argument("--recordings", help="an unpacked directory instead of the tarballs")
    a = p.parse_args(argv)
    tool = os.path.join(a.build, "bench", "live", "live_detect_replay")
    with tempfile.TemporaryDirectory() as tmp:
        root = a.recordings
        if root is None:
            root = tmp
            for t in sorted(glob.glob(os.path.join(REPO, "bench/ddp/results/change_w100*recordings.tar.xz"))):
                with tarfile.open(t) as tf:
                    tf.extractall(tmp, [m for m in tf.getmembers()
                                        if any("-%s-%s-" % (r, a.magnitude) in m.name for r in a.rows)])
        summary = {}
        for row in a.rows:
            paths = sorted(glob.glob(os.path.join(root, "*", "chg-%s-%s-*.jsonl" % (row, a.magnitude))))
            out = subprocess.run([tool] + tool_args + [spec(x, row) for x in paths],
                                 stdout=subprocess.PIPE, universal_newlines=True, check=True).stdout
            lines = [json.loads(x) for x in out.splitlines() if x.startswith("{\"path")]
            for x in lines:
                x["path"] = os.path.relpath(x["path"], root)
                print(json.dumps(x))
            d = sorted(x["delay_steps"] for x in lines if x["hit"])
            bound = sum(x["hit"] and x["delay_steps"] < x["bound_steps"] for x in lines)
            summary[row] = (len(lines), sum(x < 10 for x in d), sum(x < 30 for x in d), bound,
                            d[(len(d) - 1) // 2] if d else None,
                            sum(x["false_before"] > 0 for x in lines))
        for row, (n, h10, h30, hb, med, fb) in summary.items():
            print("%s %s: hit within 10 steps %d of %d, within 30 %d, within the bound (10 steps"
                  " or 30 s) %d (median delay %s); runs with a straggler verdict before the onset %d"
                  % (row, a.magnitude, h10, n, h30, hb, med, fb))


if __name__ == "__main__":
    main()
