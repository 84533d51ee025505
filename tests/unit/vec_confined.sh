#!/bin/bash
# Every intrinsic of the project lives in daemon/core/vec/ (docs/LAYOUT.md):
# fails, naming the files, where a C or C++ source elsewhere includes
# immintrin.h, names an x86 vector type or intrinsic, or asks the CPU for
# its instruction sets (choose.c is the one place that does).
# usage: vec_confined.sh SOURCE_DIR
set -u
cd "$1" || exit 2
pattern='immintrin\.h|[a-z]mmintrin\.h|\b_mm(256|512)?_[a-z0-9_]+\(|\b__m(64|128|256|512)[id]?\b|\b__mmask(8|16|32|64)\b|target\("(avx|sse)|__builtin_cpu_supports'
found=$(find bench client daemon include tests -type f \
            \( -name '*.c' -o -name '*.h' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' \) \
            -not -path 'daemon/core/vec/*' -print0 | xargs -0 grep -lE "$pattern")
if [ -n "$found" ]; then
    echo "vector code outside daemon/core/vec/:"
    echo "$found"
    exit 1
fi
# The check itself must see the kernels where they are.
if ! grep -rqE "$pattern" daemon/core/vec; then
    echo "no vector code found in daemon/core/vec/: the pattern is broken"
    exit 1
fi
echo "vector code confined to daemon/core/vec/"
