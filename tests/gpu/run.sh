#!/bin/bash
# The side evidence against a real GPU, NCCL and CUDA runtime (docs/SIDE_EVIDENCE.md,
# "On a real GPU"). Builds this tree in Release, starts a private sfd, and runs
# tests/gpu/gpu_job.py twice: one NCCL communicator, then several on the one GPU.
# Not part of .ci/run: CI has no GPU.
#
# Exit codes: 0 every check passed; 1 a check failed (the summary says which);
# 2 this machine cannot run the checks (no GPU, no CUDA torch, missing build
# dependencies), with the reason on stderr.
#
# Environment: PYTHON (default python3, the interpreter that holds torch);
# SF_GPU_BUILD (default <repo>/build-gpu); SF_GPU_DEBS, a folder of Debian
# packages (tests/gpu/fetch-debs.sh) unpacked into a private root when the
# build dependencies are not installed.
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

# Unpacks carried .debs into a private root and points pkg-config, CMake,
# the loader and PATH at it. Only for machines that cannot install packages.
use_carried_debs() {
  local debs=$1 root=$build/deps
  [ -d "$debs" ] || cannot_run "SF_GPU_DEBS=$debs is not a folder"
  mkdir -p "$root"
  for deb in "$debs"/*.deb; do
    [ -e "$deb" ] || cannot_run "no .deb in $debs"
    dpkg-deb -x "$deb" "$root" 2>/dev/null || dpkg -x "$deb" "$root" ||
      cannot_run "cannot unpack $deb (no dpkg-deb or dpkg)"
  done
  local multiarch=$root/usr/lib/x86_64-linux-gnu
  export PATH=$root/usr/bin:$PATH
  export LD_LIBRARY_PATH=$multiarch${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export PKG_CONFIG_PATH=$multiarch/pkgconfig:$root/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$root
  export LIBRARY_PATH=$multiarch
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
    "(install them, or carry .debs made by tests/gpu/fetch-debs.sh and set SF_GPU_DEBS)"
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
if [ -n "${SF_GPU_DEBS:-}" ]; then
  use_carried_debs "$SF_GPU_DEBS"
fi
require_build_deps
find_nccl_home
mkdir -p "$build"
build_tree

export SFD=$build/daemon/sfd/sfd SFCTL=$build/daemon/sfctl/sfctl
export SF_NCCL_PLUGIN=$build/client/nccl/libnccl-profiler-stagefrontier.so
export PYTHONPATH=$build/python${PYTHONPATH:+:$PYTHONPATH}
rc=0
for case in single multi; do
  "$python" "$repo/tests/gpu/gpu_job.py" --case "$case" || rc=1
done
[ $rc -eq 0 ] && echo "gpu: all checks passed" || echo "gpu: checks FAILED"
exit $rc
