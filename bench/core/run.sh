#!/bin/sh
# Accounting-core benchmark: builds bench_core when needed, then times it and
# the NumPy reference side by side on the same matrices (bench_core --dump),
# checks that both computed the same figures, and prints the ratios against
# the targets (docs/SPEC.md section 6: frontier pass >= 1e9 cells/s; full
# report <= 150 ms and >= 3.5x NumPy at 16384 ranks, >= 4x NumPy at 1024;
# mergeable summary build >= 4e8 cells/s), with the load average before and
# after.
# Environment: BUILD (build directory, default build-bench), REPS (best of).
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$root/build-bench}
reps=${REPS:-5}

if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S "$root" -B "$build" >/dev/null
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/sf_bench_core.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
if ! cmake --build "$build" -j2 --target bench_core >"$tmp/build.log" 2>&1; then
    cat "$tmp/build.log" >&2
    exit 1
fi

# One shape at a time, C then NumPy, so each pair runs under the same load.
numpy_version=$(/usr/bin/python3 -c 'import numpy; print(numpy.__version__)')
echo "C: bench_core best of $reps; NumPy $numpy_version: best of 3; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for ranks in 8 1024 16384; do
    mkdir "$tmp/$ranks"
    "$build/bench/core/bench_core" --ranks "$ranks" --reps "$reps" --dump "$tmp/$ranks" \
        --tsv "$tmp/$ranks/c.tsv" >/dev/null
    /usr/bin/python3 "$root/bench/core/numpy_reference.py" --bench "$tmp/$ranks" \
        --tsv "$tmp/$ranks/n.tsv" --reps 3 >/dev/null
    cat "$tmp/$ranks/c.tsv" >>"$tmp/c.tsv"
    cat "$tmp/$ranks/n.tsv" >>"$tmp/n.tsv"
done
exec /usr/bin/python3 - "$tmp/c.tsv" "$tmp/n.tsv" "$root/bench/core" <<'PY'
import sys
sys.path.insert(0, sys.argv[3])
from numpy_reference import LABELS

def load(path):
    out = {}
    for line in open(path):
        f = line.rstrip("\n").split("\t")
        out[int(f[1])] = f
    return out

c, n = load(sys.argv[1]), load(sys.argv[2])
ok = True
print(f"load after the run: {open('/proc/loadavg').read().split()[:3]}")
print(f"{'ranks x steps x stages':<22} {'frontier C c/s':>15} {'NumPy c/s':>11} {'C/NumPy':>8}"
      f" {'report C ms':>12} {'NumPy ms':>10} {'NumPy/C':>8}")
for ranks in sorted(c):
    fc, fn = c[ranks], n[ranks]
    T, S = int(fc[2]), int(fc[3])
    cells = ranks * T * S
    front_c, front_n = float(fc[4]), float(fn[4])
    rep_c, rep_n = float(fc[6]), float(fn[6])
    c_labels = ",".join(name for i, name in enumerate(LABELS) if int(fc[13]) >> i & 1)
    same = fc[9:13] == fn[7:11] and c_labels == fn[11]
    ok &= same
    print(f"{f'{ranks} x {T} x {S}':<22} {cells / front_c:>15.3e} {cells / front_n:>11.3e}"
          f" {front_n / front_c:>8.1f} {rep_c * 1e3:>12.3f} {rep_n * 1e3:>10.3f}"
          f" {rep_n / rep_c:>8.2f}{'' if same else '  FIGURES DIFFER'}")
    summary_cs = cells / float(fc[5])
    want = {1024: 4.0, 16384: 3.5}.get(ranks)
    report_target = ""
    if want is not None:
        report_target = (f" report >= {want}x NumPy: {'met' if rep_n / rep_c >= want else 'missed'}"
                         + (f", <= 150 ms: {'met' if rep_c <= 0.150 else 'missed'}"
                            if ranks == 16384 else "") + ";")
    print(f"{'':<22} frontier >= 1e9 c/s: {'met' if cells / front_c >= 1e9 else 'missed'}"
          f" (a plain read of the matrix: {cells / float(fc[15]):.3e} int64/s);"
          f" sf_summary_build, mergeable: {summary_cs:.3e} c/s"
          f" (>= 4e8: {'met' if summary_cs >= 4e8 else 'missed'});{report_target}"
          f" C report = dense build {float(fc[7]) * 1e3:.3f} ms + compute {float(fc[8]) * 1e3:.3f} ms;"
          f" the two median passes alone {float(fc[14]) * 1e3:.3f} ms"
          f" (NumPy/medians {rep_n / float(fc[14]):.1f})")
print("figures (exposed time, advances, both gains, labels): "
      + ("identical in C and NumPy" if ok else "C and NumPy DISAGREE"))
sys.exit(0 if ok else 1)
PY
