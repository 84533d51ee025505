#!/bin/bash
# Black-box tests of `sfctl import`: exact rows from hand-checked Kineto and
# Nsight fixtures, plain and gzipped input, output round trips through
# `sfctl replay`, and every bad input with its message and exit code.
# usage: run.sh SFCTL SOURCE_DIR
set -u
sfctl=$1
cd "$2" || exit 2
data=tests/import/data
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
subcommand=import
# shellcheck source=tests/cli_expect.sh
. tests/cli_expect.sh

same() {     # NAME FILE-A FILE-B
    if diff -u "$2" "$3" >"$out/diff"; then ok; else bad "$1: $2 and $3 differ"; head -20 "$out/diff"; fi
}

# Rows of the hand-checked fixtures (docs/IMPORT.md explains each figure):
# rank 0 step 5 charges the callback/backward overlap to backward and the
# callback/optimizer overlap to callbacks; step 6 clips an optimizer range
# that runs past the step and keeps fractional microseconds exactly.
cat >"$out/want.csv" <<'CSV'
step,rank,data.next_wait,model.fwd_loss_cpu_wall,model.backward_cpu_wall,callbacks.cpu_wall,optim.step_cpu_wall,step.other_cpu_wall,step_wall
5,0,0.000100000,0.000300000,0.000300000,0.000050000,0.000150000,0.000100000,0.001000000
6,0,0.000200250,0.000300000,0.000300000,0.000050000,0.000150250,0.000000000,0.001000500
5,1,0.000400000,0.000300000,0.000300000,0.000050000,0.000100000,0.000050000,0.001200000
6,1,0.000010000,0.000300000,0.000300000,0.000040000,0.000100000,0.000050000,0.000800000
CSV
"$sfctl" import kineto $data/rank0.json $data/rank1.json --csv >"$out/got.csv" 2>"$out/stderr" \
    && ok || bad "kineto csv: exit $? ($(cat "$out/stderr"))"
same kineto-csv "$out/want.csv" "$out/got.csv"

gzip -c $data/rank1.json >"$out/rank1.json.gz"
"$sfctl" import kineto $data/rank0.json "$out/rank1.json.gz" -o "$out/gz.csv" 2>"$out/stderr" \
    && ok || bad "kineto gz: exit $? ($(cat "$out/stderr"))"
same kineto-gz "$out/want.csv" "$out/gz.csv"

# JSON Lines and CSV outputs replay to the same report as --replay does.
"$sfctl" import kineto $data/rank0.json $data/rank1.json -o "$out/rec.jsonl" 2>/dev/null || bad "jsonl: exit $?"
[ ! -e "$out/rec.jsonl.tmp" ] && ok || bad "jsonl: temporary file left behind"
"$sfctl" replay --json --warmup-steps 0 "$out/rec.jsonl" >"$out/r1.json" 2>/dev/null || bad "replay jsonl: exit $?"
"$sfctl" replay --json --warmup-steps 0 "$out/got.csv" >"$out/r2.json" 2>/dev/null || bad "replay csv: exit $?"
"$sfctl" import kineto --replay --json --warmup-steps 0 $data/rank0.json $data/rank1.json \
    >"$out/r3.json" 2>/dev/null || bad "import --replay: exit $?"
same replay-jsonl-vs-csv "$out/r1.json" "$out/r2.json"
same replay-jsonl-vs-import "$out/r1.json" "$out/r3.json"
grep -q '"routing_order"' "$out/r3.json" && ok || bad "import --replay printed no report"
head -1 "$out/rec.jsonl" | grep -q '"world_size":2' && ok || bad "jsonl header lacks world_size 2"

# Nsight Systems: fixtures in the exporter's schema, ranks from file names.
/usr/bin/python3 tests/import/make_nsys.py "$out/nsys-rank0.sqlite" 0
/usr/bin/python3 tests/import/make_nsys.py "$out/nsys-rank1.sqlite" 1
cat >"$out/want-nsys.csv" <<'CSV'
step,rank,data.next_wait,model.fwd_loss_cpu_wall,model.backward_cpu_wall,callbacks.cpu_wall,optim.step_cpu_wall,step.other_cpu_wall,step_wall
0,0,0.000200000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001100000
1,0,0.000200000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001100000
2,0,0.000200000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001100000
0,1,0.000500000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001400000
1,1,0.000500000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001400000
2,1,0.000500000,0.000400000,0.000300000,0.000000000,0.000150000,0.000050000,0.001400000
CSV
"$sfctl" import nsys --rank-from 'rank([0-9]+)' --allow-empty-stage --csv \
    "$out/nsys-rank0.sqlite" "$out/nsys-rank1.sqlite" >"$out/nsys.csv" 2>"$out/stderr" \
    && ok || bad "nsys: exit $? ($(cat "$out/stderr"))"
same nsys-csv "$out/want-nsys.csv" "$out/nsys.csv"
"$sfctl" import nsys --rank-from 'rank([0-9]+)' --allow-empty-stage --replay --warmup-steps 0 \
    "$out/nsys-rank0.sqlite" "$out/nsys-rank1.sqlite" >"$out/nsys.txt" 2>/dev/null
grep -q "^route: data.next_wait" "$out/nsys.txt" && ok || bad "nsys replay does not route data.next_wait"

# ---- bad input: exit 3 (a file is unreadable or malformed) ----
head -c 700 $data/rank0.json >"$out/trunc-rank0.json"
expect truncated-json 3 "trunc-rank0.json: byte 700: truncated JSON" -- kineto "$out/trunc-rank0.json"
gzip -c $data/rank0.json | head -c 300 >"$out/trunc.json.gz"
expect truncated-gzip 3 "trunc.json.gz: gzip: unexpected end of file" -- kineto "$out/trunc.json.gz"
printf '\037\213\010\000\000\000\000\000\000\003garbage-not-deflate' >"$out/corrupt.json.gz"
expect corrupt-gzip 3 "corrupt.json.gz: gzip:" -- kineto "$out/corrupt.json.gz"
printf '{"traceEvents": [{"name": "a", "ph": "X", "ts": 1, "dur": 2}]} x' >"$out/trailing.json"
expect trailing-data 3 "data after the end of the trace" -- kineto "$out/trailing.json"
printf '{"traceEvents": [{"name": "a" "ph": "X"}]}' >"$out/colon.json"
expect missing-comma 3 "colon.json: byte 30: expected ',' or '}', found '\"'" -- kineto "$out/colon.json"
printf '{"traceEvents": [{"name" "a"}]}' >"$out/colon.json"
expect missing-colon 3 "colon.json: byte 25: expected ':', found '\"'" -- kineto "$out/colon.json"
printf '{"displayTimeUnit": "ms"}' >"$out/noevents.json"
expect no-trace-events 3 "no traceEvents array" -- kineto "$out/noevents.json"
: >"$out/empty.json"
expect empty-file 3 "empty.json: byte 0: the file is empty" -- kineto "$out/empty.json"
expect no-steps 3 "nosteps.json: no step range" -- kineto $data/nosteps.json
expect missing-file 3 "nope.json: No such file or directory" -- kineto $data/nope.json
expect bad-map 3 "bad.ini: line 4: unknown key \"pattern\"" -- kineto --map $data/bad.ini $data/rank0.json
expect no-rank 3 "no rank: the trace carries no distributedInfo" -- kineto $data/nosteps.json $data/nosteps.json
expect not-sqlite 3 "rank0.json: not an SQLite database" -- nsys $data/rank0.json
/usr/bin/python3 -c "import sqlite3; sqlite3.connect('$out/other.sqlite').execute('create table t (x)')"
expect no-nvtx 3 "other.sqlite: no NVTX_EVENTS table" -- nsys "$out/other.sqlite"
# Hostile schemas: views and triggers are refused before any query runs, a
# generated column is cut at the value limit, a join that makes each event
# scan a table stops at the total work budget, one event that scans 2 million
# strings at the per-row budget; each fails within 5 seconds.
hostile() {  # KIND MESSAGE
    /usr/bin/python3 tests/import/make_hostile_nsys.py "$out/$1.sqlite" "$1"
    local t0 t1
    t0=$(date +%s%N)
    expect "hostile-$1" 3 "$1.sqlite: $2" -- nsys --rank-from '(0)' "$out/$1.sqlite"
    t1=$(date +%s%N)
    [ $(((t1 - t0) / 1000000)) -lt 5000 ] && ok || bad "hostile-$1 took $(((t1 - t0) / 1000000)) ms"
}
hostile recursive-view "StringIds is a view, not a table: sfctl import reads tables only"
hostile huge-view "StringIds is a view, not a table"
hostile trigger "NVTX_EVENTS has a trigger (steal)"
hostile huge-column "reading NVTX_EVENTS: a value longer than 1048576 bytes: refused"
hostile quadratic "reading NVTX_EVENTS: more than "
grep -q "steps of work in total for a file of this size: refused" "$out/stderr" && ok || bad "quadratic: $(cat "$out/stderr")"
hostile heavy-row "reading NVTX_EVENTS: more than 10000000 steps of work for one row: refused"
rm -f "$out/heavy-row.sqlite"

# Bounded readers: a 100 MB name in a trace and a 100 MB line in a mapping
# file are cut or refused while they are read; peak RSS stays under 64 MiB.
small_rss() {  # NAME ARGS...
    local name=$1
    shift
    /usr/bin/time -f '%M' -o "$out/rss" "$sfctl" import "$@" >/dev/null 2>&1
    local kb
    kb=$(tail -1 "$out/rss")
    [ "$kb" -lt 65536 ] && ok || bad "$name: peak RSS $kb KB"
}
if [ -x /usr/bin/time ]; then
    { printf '{"traceEvents": [{"name": "'; head -c 100000000 /dev/zero | tr '\0' 'x'
      printf '", "ph": "X", "ts": 1, "dur": 2}]}'; } >"$out/longname.json"
    small_rss long-name kineto "$out/longname.json"
    rm -f "$out/longname.json"
    { echo "[steps]"; head -c 100000000 /dev/zero | tr '\0' 'x'; echo; } >"$out/long.ini"
    expect long-map-line 3 "long.ini: line 2: malformed line" -- kineto --map "$out/long.ini" $data/rank0.json
    small_rss long-map-line kineto --map "$out/long.ini" $data/rank0.json
    rm -f "$out/long.ini"
else
    echo "SKIP bounded readers: /usr/bin/time is missing"
fi

# ---- inputs that do not fit together: exit 7 ----
expect missing-rank 0 "ranks missing from the 1 traces (world size 2): 1; the rows cover the 1 ranks traced" -- \
    kineto $data/rank0.json -o "$out/partial.jsonl"
# A partial set keeps its ranks in the whole world, and replays.
if head -1 "$out/partial.jsonl" | grep -q '"world_size":2' &&
    "$sfctl" replay --warmup-steps 0 "$out/partial.jsonl" >"$out/partial.txt" 2>&1 && grep -q "ranks of 2" "$out/partial.txt"; then
    ok
else
    bad "partial set: $(head -c 300 "$out/partial.jsonl") / $(cat "$out/partial.txt")"
fi
cp $data/rank0.json "$out/copy.json"
expect duplicate-rank 7 "rank 0 is duplicated" -- kineto $data/rank0.json "$out/copy.json"
sed 's/"world_size":2/"world_size":4/' $data/rank1.json >"$out/other-job.json"
expect other-world 7 "traces from different jobs: world size 4" -- kineto $data/rank0.json "$out/other-job.json"
sed 's/"ts":1700000000/"ts":1700000900/g' $data/rank1.json >"$out/later-job.json"
expect disjoint-time 7 "traces from different jobs" -- kineto $data/rank0.json "$out/later-job.json"
expect empty-stage 7 "empty_stage.ini: stage comm is empty in every trace" -- \
    kineto --map $data/empty_stage.ini $data/rank0.json $data/rank1.json
cp $data/rank0.json "$out/rank1-copy.json"
expect rank-mismatch 7 "distributedInfo says rank 0 but the file name gives rank 1" -- \
    kineto --rank-from 'rank([0-9])' "$out/rank1-copy.json" $data/rank1.json
/usr/bin/python3 tests/import/make_nsys.py "$out/nsys-late-rank1.sqlite" 1 3600
expect nsys-other-job 7 "traces from different jobs" -- nsys --rank-from 'rank([0-9]+)' \
    --allow-empty-stage "$out/nsys-rank0.sqlite" "$out/nsys-late-rank1.sqlite"

# ---- usage: exit 2 ----
expect no-format 2 "usage: sfctl import" --
expect unknown-format 2 "usage: sfctl import" -- perfetto x.json
expect replay-flag-alone 2 "usage: sfctl import" -- kineto --json $data/rank0.json
expect bad-tau 2 "invalid --tau value \"2\"" -- kineto --replay --tau 2 $data/rank0.json
expect bad-regex 2 "is not a valid regular expression" -- kineto --rank-from '(' $data/rank0.json

echo "import: $pass passed, $fail failed"
[ "$fail" = 0 ]
