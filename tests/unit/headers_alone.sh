#!/bin/sh
# Each public header under include/stagefrontier, included first and alone,
# compiles in C17 and in C++17 with -Wall -Wextra -Werror: a header that leans
# on its includer for <stddef.h> or on a C-only keyword fails here.
# usage: headers_alone.sh CC CXX INCLUDE_DIR
set -eu
cc=$1 cxx=$2 inc=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/sfheaders.XXXXXX")
trap 'rm -rf "$work"' EXIT
n=0 failed=0
for h in "$inc"/stagefrontier/*.h; do
  name=$(basename "$h")
  printf '#include <stagefrontier/%s>\nint sf_header_alone_probe;\n' "$name" > "$work/probe.c"
  cp "$work/probe.c" "$work/probe.cpp"
  if ! "$cc" -std=c17 -Wall -Wextra -Werror -I"$inc" -c "$work/probe.c" -o "$work/probe_c.o"; then
    echo "FAIL: $name alone in C17" >&2
    failed=$((failed + 1))
  fi
  if ! "$cxx" -std=c++17 -Wall -Wextra -Werror -I"$inc" -c "$work/probe.cpp" -o "$work/probe_cxx.o"; then
    echo "FAIL: $name alone in C++17" >&2
    failed=$((failed + 1))
  fi
  n=$((n + 1))
done
if [ "$n" -eq 0 ]; then
  echo "FAIL: no header in $inc/stagefrontier" >&2
  exit 1
fi
echo "$n headers, $failed failures"
[ "$failed" -eq 0 ]
