#!/bin/sh
# What parallel coordinates cost sfd a record (issue 51's target: at most
# 10 % more; docs/PERFORMANCE.md): the ingest benchmark run with the senders'
# Hellos carrying coordinates (--parallel PP: pp=PP x dp=SENDERS/PP, so that
# sfd gathers them and builds every window summary's cohort part and the
# report compares ranks inside cohorts) and without, alternated ABBA... for
# ROUNDS rounds in one session, each run one paced rate held losslessly.
# Prints each run's sfd CPU per record (at the paced rate), then the median
# of the pairs' ratios (with / without) with a distribution-free interval
# (order statistics of the ratios, sign-test coverage >= 90 %).
# Environment: BUILD (Release build directory, default build-rel), ROUNDS (8),
# RATE (records/s, 150000), RECORDS (per sender, 150000), PP (2),
# WINDOW_STEPS (100), SENDERS (8).
# CALLGRIND=1 counts instructions instead, which a shared machine's load does
# not move: each arm once (ROUNDS 1) with sfd under valgrind's callgrind, at
# RATE 2000 and RECORDS 3000 unless given, no unpaced run; prints sfd's
# instructions a record (the whole process, its start and exit included) and
# the ratio. Valgrind has no AVX-512: the core runs its AVX2 forms there.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-rel}
callgrind=${CALLGRIND:-0}
if [ "$callgrind" = 1 ]; then
    rounds=${ROUNDS:-1}
    rate=${RATE:-2000}
    records=${RECORDS:-3000}
else
    rounds=${ROUNDS:-8}
    rate=${RATE:-150000}
    records=${RECORDS:-150000}
fi
pp=${PP:-2}
window=${WINDOW_STEPS:-100}
senders=${SENDERS:-8}
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target sfd sfctl ingest_client >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
out=$tmp/runs
sfd=$build/daemon/sfd/sfd
if [ "$callgrind" = 1 ]; then
    sfd=$tmp/sfd # sfd under callgrind, its counts in $tmp/callgrind.out
    printf '#!/bin/sh\nexec valgrind -q --tool=callgrind --callgrind-out-file=%s %s "$@"\n' \
        "$tmp/callgrind.out" "$build/daemon/sfd/sfd" >"$sfd"
    chmod +x "$sfd"
fi
# $1: 0 (no coordinates) or PP; prints "cost_per_record lost jobs_with_cohorts",
# the cost in us of CPU, or with CALLGRIND=1 in instructions
run() {
    rm -f "$tmp/callgrind.out"
    /usr/bin/python3 "$root/bench/ingest/ingest_bench.py" --sfd "$sfd" \
        --sfctl "$build/daemon/sfctl/sfctl" --client "$build/bench/ingest/ingest_client" \
        --records "$records" --rates "$rate" --senders "$senders" \
        --window-steps "$window" --parallel "$1" $([ "$callgrind" = 1 ] && echo --no-unpaced) |
        awk -v rate="$rate" '$1 == "sfd" && $2 == rate {us = 1e6 / $11; lost = $8}
             /^cohorts:/ {c = $2}
             END {printf "%.4f %d %d\n", us, lost, c}' >"$tmp/run"
    set -- $(cat "$tmp/run")
    if [ "$callgrind" = 1 ]; then
        ir=$(callgrind_annotate "$tmp/callgrind.out" | awk '/PROGRAM TOTALS/ {gsub(",", "", $1); print $1}')
        set -- "$(echo "$ir $records $senders $2" | awk '{printf "%.1f", $1 / ($2 * $3 - $4)}')" "$2" "$3"
    fi
    echo "$1 $2 $3"
}
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
i=0
while [ "$i" -lt "$rounds" ]; do
    # ABBA: without with, then with without, so a drift of the load cancels
    if [ $((i % 2)) -eq 0 ]; then order="0 $pp"; else order="$pp 0"; fi
    for par in $order; do
        set -- $(run "$par")
        echo "$par $1 $2 $3" | tee -a "$out"
    done
    i=$((i + 1))
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
/usr/bin/python3 - "$out" "$pp" "$callgrind" <<'PY'
import math, statistics, sys
runs = [l.split() for l in open(sys.argv[1])]
pp = sys.argv[2]
on = [float(r[1]) for r in runs if r[0] == pp]
off = [float(r[1]) for r in runs if r[0] == "0"]
lost = sum(int(r[2]) for r in runs)
if lost:  # the cost is per record ingested; a loss says the machine was short
    print("warning: the paced runs lost %d records in all (a loaded machine)" % lost)
if any(int(r[3]) == 0 for r in runs if r[0] == pp) or any(int(r[3]) for r in runs if r[0] == "0"):
    sys.exit("the cohorts were not applied as asked")
ratios = sorted(a / b for a, b in zip(on, off))
n = len(ratios)
# [x_(k), x_(n-k+1)] covers the median ratio with probability
# 1 - 2 P(Binomial(n, 1/2) < k): the largest k with coverage >= 0.9.
cover = lambda k: 1 - 2 * sum(math.comb(n, j) for j in range(k)) / 2 ** n
k = max([k for k in range(1, n // 2 + 1) if cover(k) >= 0.9] or [1])
unit = "instructions" if sys.argv[3] == "1" else "us of CPU"
spread = ("%.0f %% interval [%.3f, %.3f]" % (100 * cover(k), ratios[k - 1], ratios[n - k])
          if n >= 2 else "one pair")
print("sfd a record: with coordinates (pp=%s) %.3f, without %.3f %s (medians of %d runs"
      " each); with/without: median of the pairs %.3f, %s (pairs %s)"
      % (pp, statistics.median(on), statistics.median(off), unit, len(on),
         statistics.median(ratios), spread, " ".join("%.3f" % x for x in ratios)))
PY
