#!/bin/sh
# What the live verdict's per-step test costs sfd a record (docs/LIVE.md):
# the ingest benchmark run with `live_verdict` on and off, alternated ROUNDS
# times (ABBA...) in one session, each run one paced rate that every round
# holds losslessly (so every window is eligible and the baseline forms).
# Prints sfd's CPU per record of each run, then the median difference
# (on - off) and the median ratio. Environment: BUILD (Release build
# directory, default build-bench), ROUNDS (4), RATE (records/s, 200000),
# RECORDS (per sender, 60000).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-bench}
rounds=${ROUNDS:-4}
rate=${RATE:-200000}
records=${RECORDS:-60000}
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target sfd sfctl ingest_client >/dev/null
run() { # $1: yes|no; prints "us_per_record steps_tested"
    /usr/bin/python3 "$root/bench/ingest/ingest_bench.py" --sfd "$build/daemon/sfd/sfd" \
        --sfctl "$build/daemon/sfctl/sfctl" --client "$build/bench/ingest/ingest_client" \
        --records "$records" --rates "$rate" --set "sfd.live_verdict=$1" |
        awk '/^sfd CPU cost:/ {us = 1e6 / $4} /^live verdict:/ {t = $3}
             END {printf "%.4f %d\n", us, t}'
}
out=$(mktemp)
trap 'rm -f "$out"' EXIT INT TERM
i=0
while [ "$i" -lt "$rounds" ]; do
    # ABBA: off on, then on off, so a drift of the machine's load cancels
    if [ $((i % 2)) -eq 0 ]; then order="no yes"; else order="yes no"; fi
    for live in $order; do
        set -- $(run "$live")
        echo "$live $1 $2" | tee -a "$out"
    done
    i=$((i + 1))
done
/usr/bin/python3 - "$out" <<'PY'
import statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
on = [float(r[1]) for r in runs if r[0] == "yes"]
off = [float(r[1]) for r in runs if r[0] == "no"]
tested = [int(r[2]) for r in runs if r[0] == "yes"]
if min(tested) == 0:
    sys.exit("a run with the live verdict on tested no step: no baseline formed")
d = [a - b for a, b in zip(on, off)]
print("sfd CPU a record: live on %.3f us, off %.3f us (medians of %d runs each);"
      " on - off %.3f us (pairs %s); on/off %.3f; steps tested a run >= %d"
      % (statistics.median(on), statistics.median(off), len(on), statistics.median(d),
         " ".join("%.3f" % x for x in d), statistics.median(a / b for a, b in zip(on, off)),
         min(tested)))
PY
