#!/bin/bash
# Packs what tests/gpu/run.sh needs from a build made here, for a GPU machine
# that cannot install this project's build dependencies (no package archive):
#   tests/gpu/bundle.sh BUILD DIR    then, there:    SF_GPU_BUNDLE=DIR tests/gpu/run.sh
# BUILD must hold sfd, sfctl and the NCCL plugin (cmake --build BUILD). DIR gets
#   bin/     sfd, sfctl, libnccl-profiler-stagefrontier.so
#   lib/     the shared libraries sfd and sfctl load, less the C library's own
#   client/  libsfclient and protobuf-c to link the Python module against there,
#            with the generated protocol headers
# The Python module is not packed: it must match the interpreter there, so
# run.sh compiles it there (the machine needs a C compiler and Python.h).
# The target's C library must be as new as this machine's or newer.
set -euo pipefail
build=$(cd "${1:?usage: bundle.sh BUILD DIR}" && pwd)
dir=${2:?usage: bundle.sh BUILD DIR}
bins=("$build/daemon/sfd/sfd" "$build/daemon/sfctl/sfctl"
      "$build/client/nccl/libnccl-profiler-stagefrontier.so")
for f in "${bins[@]}" "$build/client/lib/libsfclient_static.a" "$build/proto/libsfproto.a"; do
  [ -f "$f" ] || { echo "bundle.sh: $f not built" >&2; exit 1; }
done
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib" "$dir/client/include/protobuf-c"
cp "${bins[@]}" "$dir/bin/"
# Everything the binaries load that is not part of the C library itself.
ldd "${bins[@]}" | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
  grep -Ev '/(libc|libm|libpthread|libdl|librt|libresolv)\.so|/ld-linux' |
  while read -r lib; do cp -L "$lib" "$dir/lib/"; done
protobuf_c=$(ldd "$build/client/nccl/libnccl-profiler-stagefrontier.so" |
  awk '$1 ~ /^libprotobuf-c\.so/ { print $3 }')
cp -L "$protobuf_c" "$dir/client/"
cp "$build/client/lib/libsfclient_static.a" "$build/proto/libsfproto.a" "$dir/client/"
cp "$build"/proto/*.pb-c.h "$dir/client/include/"
cp /usr/include/protobuf-c/protobuf-c.h "$dir/client/include/protobuf-c/"
du -sh "$dir"
