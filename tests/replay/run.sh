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

golden displacement-text tests/replay/golden/displacement.txt -- docs/examples/displacement.csv
golden displacement-json tests/replay/golden/displacement.json -- --json docs/examples/displacement.csv
golden roles-json tests/replay/golden/roles.json -- --json docs/examples/roles.jsonl
golden stdin-csv tests/replay/golden/displacement.json -- --json - < docs/examples/displacement.csv

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

echo "replay: $pass passed, $fail failed"
[ "$fail" = 0 ]
