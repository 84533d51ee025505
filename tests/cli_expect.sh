# Shared by the black-box CLI tests (tests/replay/run.sh, tests/import/run.sh):
# pass/fail counting and `expect`, which runs one sfctl subcommand and checks
# its exit code, a substring of its stderr, and that it printed nothing on
# stdout when it failed. Source it after setting $sfctl, $subcommand and $out.
pass=0 fail=0

ok()  { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

expect() {   # NAME EXIT STDERR-SUBSTRING -- ARGS...
    local name=$1 want_rc=$2 want_msg=$3
    shift 4
    "$sfctl" "$subcommand" "$@" >"$out/stdout" 2>"$out/stderr"
    local rc=$?
    if [ "$rc" != "$want_rc" ]; then
        bad "$name: exit $rc, expected $want_rc ($(cat "$out/stderr"))"
    elif ! grep -qF -- "$want_msg" "$out/stderr"; then
        bad "$name: stderr '$(cat "$out/stderr")' lacks '$want_msg'"
    elif [ "$want_rc" != 0 ] && [ -s "$out/stdout" ]; then
        bad "$name: printed output despite the error"
    else
        ok
    fi
}
