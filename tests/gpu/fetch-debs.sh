#!/bin/bash
# Downloads, on a Debian 12 machine with its archive reachable, the packages
# tests/gpu/run.sh needs to build on a GPU machine that cannot install any:
#   tests/gpu/fetch-debs.sh DIR   then, there:   SF_GPU_DEBS=DIR tests/gpu/run.sh
set -euo pipefail
dir=${1:?usage: fetch-debs.sh DIR}
mkdir -p "$dir"
cd "$dir"
apt-get download \
  libuv1 libuv1-dev libprotobuf-c1 libprotobuf-c-dev protobuf-c-compiler \
  libprotobuf32 libprotoc32 libjansson4 libjansson-dev libinih1 libinih-dev \
  libsodium23 libsodium-dev libsystemd0 libsystemd-dev libcmocka0 libcmocka-dev \
  pkgconf pkgconf-bin libpkgconf3
ls -1 "$dir"
