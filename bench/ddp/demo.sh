#!/bin/bash
# StageFrontier live demo: a real 4-rank PyTorch DDP job (Gloo, CPU) with a
# fault injected on one hidden rank reports to a private sfd. The default is a
# backward-compute straggler: every rank leaves backward together in the
# gradient all-reduce, and the rank is found through the arrival points the
# DDP communication hook marks. The live report's straggler verdict must name
# the hidden rank; the routing order is printed beside it.
#
#   bench/ddp/demo.sh [BUILD_DIR]        (or SF_BUILD_DIR=...; default ./build)
#
# Environment knobs: DEMO_FAULT (data_wait | forward_host | backward_compute |
# backward_comm | callback_barrier; default backward_compute), DEMO_SEED (picks
# the hidden rank; default 3), DEMO_MAGNITUDE (delay as a fraction of the
# median step; default 0.5), DEMO_RANKS (default 4).
# Without python3-torch it runs bench/ddp's C workload instead: forked ranks
# that synchronize through a process-shared barrier, instrumented with
# libsfclient (arrivals marked before each barrier). It ends by drawing the
# window's heatmap (PNG and SVG, with its numbers as JSON) and exporting its
# Perfetto trace into DEMO_OUT (default BUILD_DIR/demo); the heatmap's hottest
# cell must be the hidden rank at the injected stage. Exit status: 0 when the
# verdict and the heatmap name the hidden rank, 1 when not, 2 on a setup error.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-${SF_BUILD_DIR:-$repo/build}}
fault=${DEMO_FAULT:-backward_compute}
seed=${DEMO_SEED:-3}
magnitude=${DEMO_MAGNITUDE:-0.5}
ranks=${DEMO_RANKS:-4}
py=/usr/bin/python3

die() { echo "demo: $*" >&2; exit 2; }

case $fault in
    data_wait) stage=data.next_wait ;;
    forward_host) stage=model.fwd_loss_cpu_wall ;;
    backward_compute|backward_comm) stage=model.backward_cpu_wall ;;
    callback_barrier) stage=callbacks.cpu_wall ;;
    *) die "unknown DEMO_FAULT '$fault'" ;;
esac

if [[ ! -d $build ]]; then
    echo "demo: no build directory at $build; configuring and building it with cmake"
    cmake -S "$repo" -B "$build" >/dev/null
    cmake --build "$build" -j2 >/dev/null
fi
build=$(cd "$build" && pwd)
sfd=$build/daemon/sfd/sfd
sfctl=$build/daemon/sfctl/sfctl
[[ -x $sfd && -x $sfctl ]] || die "sfd or sfctl missing under $build (build the tree first)"
[[ -x $py ]] || die "$py is needed to read the report"

run=$(mktemp -d /tmp/sf-demo.XXXXXX)
sfd_pid=
cleanup() {
    if [[ -n $sfd_pid ]] && kill -0 "$sfd_pid" 2>/dev/null; then
        kill -TERM "$sfd_pid" 2>/dev/null || true
        wait "$sfd_pid" 2>/dev/null || true
    fi
    rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cat >"$run/sfd.conf" <<EOF
[gates]
warmup_steps = 20
window_steps = 100
EOF
"$sfd" --runtime-dir "$run" --state-dir "$run/state" --foreground --config "$run/sfd.conf" \
    >"$run/sfd.log" 2>&1 &
sfd_pid=$!
for _ in $(seq 1 300); do
    [[ -S $run/ingest.sock && -S $run/query.sock ]] && break
    kill -0 "$sfd_pid" 2>/dev/null || { cat "$run/sfd.log" >&2; die "sfd exited"; }
    sleep 0.1
done
[[ -S $run/ingest.sock ]] || die "sfd did not create its sockets"

job=demo-$$
export SF_SOCKET=$run/ingest.sock SF_JOB_ID=$job
if [[ ${DEMO_WORKLOAD:-} != c ]] &&
   $py -c 'import torch, torch.distributed as d; assert d.is_gloo_available()' 2>/dev/null; then
    echo "demo: training a small transformer, $ranks ranks under DDP (Gloo), fault '$fault'" \
         "on a hidden rank, 20 warmup + 100 measured steps"
    export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
    # A sanitized build's binding loads only with the ASan runtime preloaded.
    pyenv=$(sed -n 's/^SF_PYTHON_TEST_ENV:INTERNAL=//p' "$build/CMakeCache.txt" 2>/dev/null || true)
    if [[ -n $pyenv ]]; then
        IFS=';' read -r -a pyenv_vars <<<"$pyenv"
        export "${pyenv_vars[@]}"
    fi
    $py "$repo/bench/ddp/train.py" --ranks "$ranks" --fault "$fault" --seed "$seed" \
        --magnitude "$magnitude" --warmup 20 --steps 100 --job-id "$job" \
        --result "$run/result.json"
    hidden=$($py -c 'import json,sys; print(json.load(open(sys.argv[1]))["hidden_rank"])' \
             "$run/result.json")
else
    workload=$build/bench/ddp/sf_sync_workload
    [[ -x $workload ]] || die "python3-torch is absent and $workload was not built"
    [[ $fault == backward_comm ]] && fault=backward_compute
    echo "demo: running the C workload (python3-torch absent or DEMO_WORKLOAD=c): $ranks" \
         "forked ranks, shared-memory barrier, fault '$fault' on a hidden rank"
    "$workload" --ranks "$ranks" --steps 120 --seed "$seed" --fault "$fault" --delay-ms 8 \
        --job-id "$job"
    hidden=$("$workload" --ranks "$ranks" --seed "$seed" --print-hidden-rank)
fi

# The window closes once every rank has reported its steps.
for _ in $(seq 1 600); do
    if "$sfctl" --socket "$run/query.sock" report "$job" --json >"$run/report.json" 2>/dev/null &&
       $py - "$run/report.json" <<'EOF'
import json, sys
w = json.load(open(sys.argv[1]))
sys.exit(0 if any("window_partial" not in (x.get("downgrade_reasons") or []) for x in w) else 1)
EOF
    then break; fi
    sleep 0.1
done

echo
"$sfctl" --socket "$run/query.sock" report "$job"
echo
set +e
$py - "$run/report.json" "$stage" "$hidden" "$run/window" <<'EOF'
import json, sys
wins, stage, hidden = json.load(open(sys.argv[1])), sys.argv[2], sys.argv[3]
full = [w for w in wins if "window_partial" not in (w.get("downgrade_reasons") or [])]
if not full:
    print("demo: FAIL: no closed window in the report")
    sys.exit(1)
w = full[0]
units = w.get("groups") or w["stages"]
order = [u["name"] for u in sorted(units, key=lambda u: -(u["advance_s"] or 0.0))]
suspects = [s["rank"] for s in w.get("suspect_ranks", [])]
v = w.get("straggler")
print("demo: injected stage %s on hidden rank %s; routing order: %s; suspect ranks: %s"
      % (stage, hidden, ", ".join(order[:3]), suspects))
print("demo: straggler verdict: %s" % (json.dumps(v) if v else "none"))
with open(sys.argv[4], "w") as f:
    print(w["window"]["index"], file=f)
if v and str(v["rank"]) == hidden:
    print("demo: PASS: the straggler verdict names hidden rank %s (sync stage %s, origin %s)"
          % (hidden, v["sync_stage"], v["origin_stage"]))
    sys.exit(0)
print("demo: FAIL: the straggler verdict does not name hidden rank %s" % hidden)
sys.exit(1)
EOF
verdict=$?
set -e
[[ -s $run/window ]] || exit "$verdict"

# The pictures of that window: the heatmap (lead counts), its numbers, and
# the Perfetto trace (open it at ui.perfetto.dev or chrome://tracing).
window=$(cat "$run/window")
out=${DEMO_OUT:-$build/demo}
mkdir -p "$out"
q=(--socket "$run/query.sock")
"$sfctl" "${q[@]}" plot "$job" --window "$window" -o "$out/heatmap.png" --data "$out/heatmap.json"
"$sfctl" "${q[@]}" plot "$job" --window "$window" -o "$out/heatmap.svg"
"$sfctl" "${q[@]}" export "$job" --window "$window" --format perfetto -o "$out/trace.json"
echo "demo: wrote $out/heatmap.png, $out/heatmap.svg, $out/heatmap.json and $out/trace.json"
$py - "$out/heatmap.json" "$stage" "$hidden" <<'EOF' || verdict=1
import json, sys
h, stage, hidden = json.load(open(sys.argv[1])), sys.argv[2], int(sys.argv[3])
hot = h["hottest"]
where = "rank %d" % hot["first_rank"] if hot["first_rank"] == hot["last_rank"] else \
        "ranks %d-%d" % (hot["first_rank"], hot["last_rank"])
print("demo: the heatmap's hottest cell: %s x %s (%s)" % (where, hot["stage"], hot["value"]))
ok = hot["first_rank"] <= hidden <= hot["last_rank"] and hot["stage"] == stage
print("demo: %s: the hottest cell is %sthe hidden rank at the injected stage"
      % ("PASS" if ok else "FAIL", "" if ok else "not "))
sys.exit(0 if ok else 1)
EOF
exit "$verdict"
