#!/bin/bash
# On a machine without nvidia-smi, run.sh must exit 2 and say why, before it
# builds or starts anything. On a GPU machine it is skipped (exit 77).
set -u
run=$1
if command -v nvidia-smi >/dev/null 2>&1; then
  echo "skipped: nvidia-smi is present, and this check is for machines without a GPU"
  exit 77
fi
err=$(SF_GPU_BUILD=/nonexistent/build-gpu "$run" 2>&1 >/dev/null)
rc=$?
[ "$rc" -eq 2 ] || { echo "run.sh exited $rc, want 2: $err"; exit 1; }
case $err in
  *"cannot run here: nvidia-smi not found"*) echo "refused: $err" ;;
  *) echo "run.sh gave no clear reason: $err"; exit 1 ;;
esac
[ ! -e /nonexistent/build-gpu ] || { echo "run.sh built before refusing"; exit 1; }
