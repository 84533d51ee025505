#!/bin/sh
# False verdicts of the live test (docs/LIVE.md) on >= 10^6 steps of
# bootstrapped clean DDP recordings: builds live_false_alarms when needed,
# unpacks the fault-free ("none") recordings of bench/ddp/results, and runs
# every recording, then the quieter runs alone (run7, run8_clean2, run14).
# Prints one JSON line per set (docs/EVALUATION.md, "Live verdict").
# Environment: BUILD (build directory, default build-bench), STEPS (10^6).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-bench}
steps=${STEPS:-1000000}
if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
fi
cmake --build "$build" -j2 --target live_false_alarms >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sf_bench_live.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
for t in "$root"/bench/ddp/results/change_w100*recordings.tar.xz; do
    tar xJf "$t" -C "$tmp" --wildcards '*none*' 2>/dev/null || true
done
cd "$tmp"
all=$(find . -name '*.jsonl' | sort)
quiet=$(find ./run7_clean ./run7_clean2 ./run8_clean2 ./run14_clean -name '*.jsonl' | sort)
bin=$build/bench/live/live_false_alarms
# Replicates of 9709 steps: every one of the 103 recordings once per 10^6 steps.
echo "all: $("$bin" --steps "$steps" --replicate-steps 9709 $all 2>"$tmp/all.err")"
grep 'false verdict' "$tmp/all.err" | awk '{print $6}' | sort | uniq -c
echo "quiet: $("$bin" --steps "$steps" --replicate-steps 9709 $quiet 2>/dev/null)"
echo "fixed baseline: $("$bin" --steps "$steps" --replicate-steps 9709 --halflife 0 $all 2>/dev/null)"
echo "day-long replicates: $("$bin" --steps "$steps" --replicate-steps 86400 $all 2>/dev/null)"
