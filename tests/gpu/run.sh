#!/bin/bash
# The side evidence against a real GPU, NCCL and CUDA runtime (docs/SIDE_EVIDENCE.md,
# "On a real GPU"). Builds this tree in Release, starts a private sfd, and runs
# tests/gpu/gpu_job.py twice: one NCCL communicator, then several on the one GPU;
# then tests/gpu/gpu_comm_job.py: a two-rank job whose hidden rank issues late,
# named from the binding's marks, then one whose hidden rank's GPU starts the
# all-reduce late, named from the NCCL plugin's data alone.
# Not part of .ci/run: CI has no GPU.
#
# Exit codes: 0 every check passed; 1 a check failed (the summary says which);
# 2 this machine cannot run the checks (no GPU, no CUDA torch, missing build
# dependencies), with the reason on stderr.
#
# Environment: PYTHON (default python3, the interpreter that holds torch);
# SF_GPU_BUILD (default <repo>/build-gpu); SF_GPU_BUNDLE, a folder made by
# tests/gpu/bundle.sh on a machine that has the build dependencies, for a GPU
# machine that has not: sfd, sfctl and the plugin come built, and only the
# Python module is compiled here, for this interpreter.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
build=${SF_GPU_BUILD:-$repo/build-gpu}
python=${PYTHON:-python3}

cannot_run() {
  echo "tests/gpu/run.sh: cannot run here: $*" >&2
  exit 2
}

require_gpu() {
  command -v nvidia-smi >/dev/null 2>&1 || cannot_run "nvidia-smi not found (no NVIDIA driver)"
  nvidia-smi -L 2>/dev/null | grep -q '^GPU ' || cannot_run "nvidia-smi lists no GPU"
  command -v "$python" >/dev/null 2>&1 || cannot_run "$python not found (set PYTHON)"
  "$python" - <<'PY' || cannot_run "$python has no torch that sees a GPU with NCCL"
import sys
import torch
import torch.distributed as dist
sys.exit(0 if torch.cuda.is_available() and dist.is_nccl_available() else 1)
PY
}

# The bundle's route: the Python module compiled against this interpreter,
# sfd and sfctl behind wrappers that give them the bundle's libraries (the
# job's own processes keep the machine's), the plugin as built.
use_bundle() {
  local bundle=$1 pkg=$build/python/stagefrontier inc suffix exe
  [ -x "$bundle/bin/sfd" ] || cannot_run "SF_GPU_BUNDLE=$bundle holds no bin/sfd (tests/gpu/bundle.sh)"
  command -v cc >/dev/null 2>&1 || cannot_run "no C compiler (cc) for the Python module"
  inc=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  [ -f "$inc/Python.h" ] || cannot_run "Python.h not found in $inc (the Python headers)"
  suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
  mkdir -p "$pkg"
  cp "$repo"/client/python/stagefrontier/*.py "$pkg/"
  cc -O2 -std=gnu17 -fPIC -fvisibility=hidden -shared -I"$repo/include" -I"$repo/client/lib" \
    -I"$bundle/client/include" -isystem "$inc" "$repo/client/python/stagefrontiermodule.c" \
    "$repo/client/python/capture_glue.c" "$bundle/client/libsfclient_static.a" \
    "$bundle/client/libsfproto.a" "$bundle/client/libprotobuf-c.so.1" -ldl -lpthread \
    -Wl,-rpath,"$bundle/client" -o "$pkg/_stagefrontier$suffix" ||
    { echo "tests/gpu/run.sh: the Python module did not build" >&2; exit 1; }
  for exe in sfd sfctl; do
    printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$bundle/lib" "$bundle/bin/$exe" >"$build/$exe"
    chmod +x "$build/$exe"
  done
  export SFD=$build/sfd SFCTL=$build/sfctl
  export SF_NCCL_PLUGIN=$bundle/bin/libnccl-profiler-stagefrontier.so
  export LD_LIBRARY_PATH=$bundle/client${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # the plugin's protobuf-c
}

require_build_deps() {
  local missing=()
  command -v cmake >/dev/null 2>&1 || missing+=(cmake)
  command -v cc >/dev/null 2>&1 || missing+=(cc)
  command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
  command -v protoc-c >/dev/null 2>&1 || missing+=(protoc-c)
  for pc in libuv libprotobuf-c jansson inih libsodium libsystemd cmocka; do
    pkg-config --exists "$pc" 2>/dev/null || missing+=("$pc")
  done
  [ ${#missing[@]} -eq 0 ] || cannot_run "missing build dependencies: ${missing[*]}" \
    "(install them, or bring a bundle made by tests/gpu/bundle.sh and set SF_GPU_BUNDLE)"
}

# nccl.h: from NCCL_HOME, else the nvidia-nccl wheel beside torch.
find_nccl_home() {
  if [ -z "${NCCL_HOME:-}" ]; then
    NCCL_HOME=$("$python" -c 'import nvidia.nccl as n; print(list(n.__path__)[0])' 2>/dev/null) || true
  fi
  [ -n "${NCCL_HOME:-}" ] && [ -f "$NCCL_HOME/include/nccl.h" ] ||
    cannot_run "nccl.h not found (set NCCL_HOME)"
  export NCCL_HOME
}

build_tree() {
  cmake -S "$repo" -B "$build" -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF \
    -DPython3_EXECUTABLE="$(command -v "$python")" >"$build.configure.log" 2>&1 ||
    { tail -30 "$build.configure.log"; cannot_run "cmake configure failed (log $build.configure.log)"; }
  cmake --build "$build" -j"$(nproc)" --target sfd sfctl sf_python_module \
    nccl_profiler_stagefrontier >"$build.build.log" 2>&1 ||
    { tail -30 "$build.build.log"; echo "tests/gpu/run.sh: build failed" >&2; exit 1; }
}

require_gpu
mkdir -p "$build"
if [ -n "${SF_GPU_BUNDLE:-}" ]; then
  bundle=$(cd "$SF_GPU_BUNDLE" 2>/dev/null && pwd) || cannot_run "SF_GPU_BUNDLE=$SF_GPU_BUNDLE is not a folder"
  use_bundle "$bundle"
else
  require_build_deps
  find_nccl_home
  build_tree
  export SFD=$build/daemon/sfd/sfd SFCTL=$build/daemon/sfctl/sfctl
  export SF_NCCL_PLUGIN=$build/client/nccl/libnccl-profiler-stagefrontier.so
fi
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
rc=0
for case in single multi; do
  "$python" "$repo/tests/gpu/gpu_job.py" --case "$case" || rc=1
done
# A rank whose hook issues its all-reduce late: named, with the wrapper's
# paired cost (docs/ACCOUNTING.md, "Communication verdict").
timeout 300 "$python" "$repo/tests/gpu/gpu_comm_job.py" || rc=1
# A rank whose GPU starts the all-reduce's kernel late, with no marks at all:
# named from the plugin's kernel start (docs/SIDE_EVIDENCE.md, "Kernel start").
timeout 300 "$python" "$repo/tests/gpu/gpu_comm_job.py" --case plugin || rc=1
[ $rc -eq 0 ] && echo "gpu: all checks passed" || echo "gpu: checks FAILED"
exit $rc
