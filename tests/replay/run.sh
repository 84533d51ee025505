#!/bin/bash
# Black-box tests of `sfctl replay`: golden outputs of the shipped examples,
# every bad-input case with its exact message and exit code, and usage errors.
# usage: run.sh SFCTL SOURCE_DIR
set -u
sfctl=$1
cd "$2" || exit 2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
subcommand=replay
# shellcheck source=tests/cli_expect.sh
. tests/cli_expect.sh

golden() {   # NAME GOLDEN-FILE -- ARGS...
    local name=$1 file=$2
    shift 3
    if ! "$sfctl" replay "$@" >"$out/got" 2>"$out/stderr"; then
        bad "$name: exit $? ($(cat "$out/stderr"))"
    elif ! diff -u "$file" "$out/got" >"$out/diff"; then
        bad "$name: output differs from $file"; head -40 "$out/diff"
    else
        ok
    fi
}

while IFS='|' read -r file rc msg; do
    case "$file" in ''|\#*) continue ;; esac
    expect "$file" "$rc" "sfctl replay: tests/replay/bad/$msg" -- --warmup-steps 0 "tests/replay/bad/$file"
done < tests/replay/cases.txt

# A 100 MB line is refused at the line limit while it is read: sfctl's
# peak RSS stays far below the line (it grew to the line before).
long_line() {  # NAME FILE MESSAGE
    "$sfctl" replay --warmup-steps 0 "$2" >"$out/stdout" 2>"$out/stderr"
    local rc=$?
    if [ "$rc" = 3 ] && grep -qF -- "$3" "$out/stderr"; then ok; else bad "$1: exit $rc ($(cat "$out/stderr"))"; fi
    /usr/bin/time -f '%M' -o "$out/rss" "$sfctl" replay --warmup-steps 0 "$2" >/dev/null 2>&1
    local kb
    kb=$(tail -1 "$out/rss")
    [ "$kb" -lt 65536 ] && ok || bad "$1: peak RSS $kb KB for a refused 100 MB line"
}
if [ -x /usr/bin/time ]; then
    { head -3 docs/examples/displacement.csv; head -c 100000000 /dev/zero | tr '\0' '1'; echo; } >"$out/long.csv"
    long_line long-csv-line "$out/long.csv" "long.csv:4:1: line longer than 1048576 bytes: refused"
    { head -c 100000000 /dev/zero | tr '\0' ' '; echo; } >"$out/long.jsonl"
    long_line long-jsonl-line "$out/long.jsonl" "long.jsonl:1:1: line longer than 1048576 bytes: refused"
    rm -f "$out/long.csv" "$out/long.jsonl"
else
    echo "SKIP long-line RSS: /usr/bin/time is missing"
fi
# A message that quotes the file escapes its control bytes (text_escape.h).
printf 'step,rank,a_cpu_wall,step.other_cpu_wall,step_wall\n0,0,x\033[2J,1,1\n' >"$out/esc.csv"
expect escaped-quote 3 'esc.csv:2:5: not a number (a_cpu_wall): "x\x1b[2J"' -- --warmup-steps 0 "$out/esc.csv"
if grep -q $'\033' "$out/stderr"; then bad "escaped-quote: a raw ESC on stderr"; else ok; fi
printf 'step,rank,a_cpu_wall,step.other_cpu_wall,step_wall\n0,0,0.1\0,0,0.1\n' >"$out/nul.csv"
expect nul-byte 3 "nul.csv:2:8: NUL byte: not a text file" -- --warmup-steps 0 "$out/nul.csv"

golden displacement-text tests/replay/golden/displacement.txt -- docs/examples/displacement.csv
golden displacement-json tests/replay/golden/displacement.json -- --json docs/examples/displacement.csv
golden roles-json tests/replay/golden/roles.json -- --json docs/examples/roles.jsonl
golden straggler-text tests/replay/golden/straggler.txt -- --warmup-steps 0 --window-steps 10 docs/examples/straggler.csv
golden stdin-csv tests/replay/golden/displacement.json -- --json - < docs/examples/displacement.csv
# straggler.csv has arrival points on every step: the sync what-if
# (docs/CHANGE.md); displacement.csv has none: the clipped lower bound.
"$sfctl" replay --json --warmup-steps 0 --window-steps 10 docs/examples/straggler.csv > "$out/s.json"
if [ "$(grep -c '"model": "sync"' "$out/s.json")" = 3 ] && ! grep -q '"lower_bound": true' "$out/s.json"; then ok; else bad "straggler what-if not the sync model"; fi

# A form of the core's kernels that is unknown is refused at start (77).
SF_CORE_ISA=avx9 expect core-isa-unknown 77 "SF_CORE_ISA=avx9: unknown form" -- docs/examples/displacement.csv
expect tau-out-of-range 2 "invalid --tau value" -- --tau 2 docs/examples/displacement.csv
expect window-steps-zero 2 "inconsistent" -- --window-steps 0 docs/examples/displacement.csv
expect no-file 2 "usage: sfctl replay" --
expect missing-file 3 "No such file" -- tests/replay/bad/does-not-exist.csv
printf '[gates]\ntau = 0.5\nbogus = 1\n' > "$out/gates.ini"
expect unknown-gate-file 3 "gates.ini:3: unknown gate \"bogus\"" -- --gates "$out/gates.ini" docs/examples/displacement.csv
printf '[gates]\ntau = 0.5\nwarmup_steps = 0\nwindow_steps = 60\n' > "$out/gates.ini"
"$sfctl" replay --json --gates "$out/gates.ini" docs/examples/displacement.csv > "$out/g.json" 2>&1
if [ "$(grep -c '"index":' "$out/g.json")" = 2 ] && grep -q '"tau": 0.5' "$out/g.json"; then ok; else bad "gates file not applied"; fi
"$sfctl" replay --json --warmup-steps 0 --window-steps 50 docs/examples/displacement.csv > "$out/p.json"
if grep -q '"window_partial"' "$out/p.json" && [ "$(grep -c '"index":' "$out/p.json")" = 3 ]; then ok; else bad "trailing window not partial"; fi

# The change against a baseline (docs/REPLAY.md). displacement.csv: 8 ranks,
# 120 steps; with 20-step windows, windows 0-2 are the default reference.
ex=docs/examples/displacement.csv
awk -F, 'NR == 1 || $2 < 4' "$ex" > "$out/four_ranks.csv"
awk -F, -v OFS=, '{ $6 = ""; sub(/,,/, ","); print }' "$ex" > "$out/no_callbacks.csv"
head -n 161 "$ex" > "$out/one_window.csv"
expect baseline-world-size 3 "four_ranks.csv: the baseline has another world size than window 0 of" \
    -- --warmup-steps 0 --window-steps 20 --baseline "$out/four_ranks.csv" "$ex"
expect baseline-schema 3 "no_callbacks.csv: the baseline has another schema than window 0 of" \
    -- --warmup-steps 0 --window-steps 20 --baseline "$out/no_callbacks.csv" "$ex"
expect baseline-short 3 "one_window.csv: the baseline has 1 of the 3 eligible windows it needs" \
    -- --warmup-steps 0 --window-steps 20 --baseline "$out/one_window.csv" "$ex"
expect baseline-missing 3 "No such file" -- --baseline "$out/none.csv" "$ex"
expect baseline-windows-zero 2 "inconsistent" -- --baseline-windows 0 "$ex"
expect baseline-windows-big 2 "invalid --baseline_windows value" -- --baseline-windows 17 "$ex"
# Own reference: windows 0-2 carry no change, windows 3-5 one against windows 0-2.
"$sfctl" replay --json --warmup-steps 0 --window-steps 20 "$ex" > "$out/own.json"
/usr/bin/python3 - "$out/own.json" <<'PY' && ok || bad "own baseline: change on the wrong windows"
import json, sys
ws = json.load(open(sys.argv[1]))
assert [w["change"] is None for w in ws] == [True] * 3 + [False] * 3, ws
assert all(w["change"]["baseline"] == {"windows": [0, 1, 2], "steps": 60} for w in ws[3:])
assert all(w["change"]["route"] == [] for w in ws[3:])  # the same job throughout: no change
PY
# A fault after the baseline: rank 5, the data straggler that leads the forward
# boundary, 30 ms slower in forward from step 60 on.
awk -F, -v OFS=, 'NR > 1 && $1 >= 60 && $2 == 5 { $4 = sprintf("%.6f", $4 + 0.03) } { print }' \
    "$ex" > "$out/fault.csv"
"$sfctl" replay --json --warmup-steps 0 --window-steps 20 "$out/fault.csv" > "$out/fault.json"
/usr/bin/python3 - "$out/fault.json" <<'PY' && ok || bad "fault after the baseline not localized"
import json, sys
for w in json.load(open(sys.argv[1]))[3:]:
    c = w["change"]
    assert c["route"][0] == "model.fwd_loss_cpu_wall", c["route"]
    assert c["suspect_ranks"][0]["rank"] == 5, c["suspect_ranks"]
    assert 0.025 < c["stages"][1]["delta_advance_s"] < 0.035, c["stages"][1]
    assert c["slowdown"] > 1.1 and w["whatif"]["basis"] == "reference"
PY
# --baseline FILE: every window is measured, here the faulty file against the clean one.
"$sfctl" replay --json --warmup-steps 0 --window-steps 20 --baseline "$ex" "$out/fault.csv" \
    > "$out/vs.json"
/usr/bin/python3 - "$out/vs.json" <<'PY' && ok || bad "--baseline FILE not applied to every window"
import json, sys
ws = json.load(open(sys.argv[1]))
assert [w["change"]["route"][:1] for w in ws] == [[]] * 3 + [["model.fwd_loss_cpu_wall"]] * 3
PY

# One window, one story (tests/replay/stall): rank 2's input pipeline is a
# little late every step, and at step 42 rank 1 stalls 12 s in forward.
# Every line about window 4 leads with rank 1's forward pass at step 42.
"$sfctl" replay --warmup-steps 0 --window-steps 10 tests/replay/stall/stall.csv >"$out/stall.txt" 2>&1
awk '/^window 4:/ {on = 1} /^window 5/ {on = 0} on' "$out/stall.txt" >"$out/w4.txt"
stall_line() {   # PREFIX EXPECTED
    if grep "^$1" "$out/w4.txt" | grep -qF -- "$2"; then ok; else bad "stall window: no '$1' line with '$2': $(cat "$out/w4.txt")"; fi
}
stall_line "step " ": step 42 stalled 11997.1 ms (rank 1 in model.fwd_loss_cpu_wall); typical steps"
stall_line "suspects: " "suspects: rank 1 (1 steps, the stall)"
stall_line "stall: " "rank 1 in model.fwd_loss_cpu_wall at step 42"
stall_line "straggler: " "straggler: rank 1 at the stall (step 42)"
stall_line "leader: " "leader: rank 1 led model.fwd_loss_cpu_wall at the stall (step 42)"
stall_line "next: " "next: profile rank 1's forward pass (model.fwd_loss_cpu_wall) at step 42"
stall_line "what-if: " "rank 1 alone saves"
"$sfctl" replay --json --warmup-steps 0 --window-steps 10 tests/replay/stall/stall.csv >"$out/stall.json"
/usr/bin/python3 - "$out/stall.json" <<'PY' && ok || bad "stall JSON"
import json, sys
ws = json.load(open(sys.argv[1]))
assert [w.get("stall", {}).get("step") for w in ws] == [None] * 4 + [42], [w.get("stall") for w in ws]
s = ws[4]["stall"]
assert s["rank"] == 1 and s["stage"] == "model.fwd_loss_cpu_wall" and s["share"] > 0.9, s
PY

echo "replay: $pass passed, $fail failed"
[ "$fail" = 0 ]
