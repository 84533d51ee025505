#!/usr/bin/python3
"""Scores the straggler verdict offline: replays `run_matrix.py verdict`
recordings (`--record-dir`, or a tarball of them) through one sfctl and
counts, per row and magnitude, the windows whose verdict names the hidden
rank, another rank, or none. Two sfctl builds on the same recordings compare
two versions of the test on identical rows.

Owns nothing but the scoring: the verdict comes from `sfctl replay --json`,
the hidden rank from faults.faulty_rank, as in run_matrix.py.

  /usr/bin/python3 bench/ddp/replay_verdicts.py --sfctl build-rel/daemon/sfctl/sfctl \\
      bench/ddp/results/verdict100_fresh_recordings.tar.gz
"""

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import faults  # noqa: E402

# verdict-<row>-<seed>-<magnitude>-<ranks>[-slot...]-<pid>.jsonl
NAME = re.compile(r"verdict-([a-z_]+)-(\d+)-([\d.]+)-(\d+)-.*\.jsonl$")


def recordings(paths, scratch):
    """Every recording file under the given directories or tarballs."""
    for path in paths:
        if os.path.isdir(path):
            root = path
        else:
            root = tempfile.mkdtemp(dir=scratch)
            with tarfile.open(path) as tar:  # regular files only, by base name
                for m in tar.getmembers():
                    name = os.path.basename(m.name)
                    if m.isfile() and NAME.match(name):
                        with tar.extractfile(m) as src, open(os.path.join(root, name), "wb") as dst:
                            dst.write(src.read())
        for d, _, files in sorted(os.walk(root)):
            for f in sorted(files):
                if NAME.match(f):
                    yield os.path.join(d, f)


def windows(sfctl, gates, path):
    args = [sfctl, "replay", "--json"] + (["--gates", gates] if gates else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sfctl", required=True)
    p.add_argument("--gates", default=None, help="an INI gates file for sfctl replay")
    p.add_argument("paths", nargs="+", help="recording directories or tarballs")
    a = p.parse_args()
    counts = collections.defaultdict(lambda: [0, 0, 0, 0])  # windows, hit, other, none
    with tempfile.TemporaryDirectory() as scratch:
        for path in recordings(a.paths, scratch):
            row, seed, mag, ranks = NAME.match(os.path.basename(path)).groups()
            hidden = faults.faulty_rank(int(seed), int(ranks))
            for w in windows(a.sfctl, a.gates, path):
                if w["window"]["index"] < 0 or w["window"]["ranks"] != int(ranks):
                    continue
                c = counts[(row, float(mag))]
                v = w.get("straggler")
                c[0] += 1
                c[3 if not v else 1 if v["rank"] == hidden else 2] += 1
    print("| row | magnitude | windows | hidden rank named | another rank | no verdict |")
    print("|---|---|---|---|---|---|")
    for (row, mag), c in sorted(counts.items()):
        print("| %s | %.2f | %d | %d | %d | %d |" % ((row, mag) + tuple(c)))


if __name__ == "__main__":
    main()
