#!/bin/bash
# Makes a bundle (bundle.sh) from this build in a temporary folder and checks
# that it holds what run.sh's bundle route uses, and that sfd and sfctl run
# from it, loading their libraries from the bundle's lib/.
set -euo pipefail
bundle_sh=$1 build=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/sf-gpu-bundle.XXXXXX")
trap 'rm -rf "$dir"' EXIT
"$bundle_sh" "$build" "$dir/b" >/dev/null
for f in bin/sfd bin/sfctl bin/libnccl-profiler-stagefrontier.so client/libsfclient_static.a \
         client/libsfproto.a client/include/ingest.pb-c.h client/include/protobuf-c/protobuf-c.h; do
  [ -s "$dir/b/$f" ] || { echo "bundle lacks $f"; exit 1; }
done
ls "$dir"/b/client/libprotobuf-c.so.* >/dev/null || { echo "bundle lacks libprotobuf-c"; exit 1; }
for exe in sfd sfctl; do
  for lib in $(LD_LIBRARY_PATH="$dir/b/lib" ldd "$dir/b/bin/$exe" | awk '$1 ~ /^lib(uv|jansson)\./ { print $3 }'); do
    case $lib in
      "$dir/b/lib/"*) ;;
      *) echo "$exe loads $lib from outside the bundle"; exit 1 ;;
    esac
  done
  LD_LIBRARY_PATH="$dir/b/lib" "$dir/b/bin/$exe" --version || { echo "$exe --version failed"; exit 1; }
done
echo "bundle ok: $(du -sh "$dir/b" | cut -f1)"
