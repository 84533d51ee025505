#!/bin/sh
# libsfclient.so must export only the public sf_ API: no sf__ internals, no
# protobuf-c or other library symbols, and nothing client.h does not declare.
# usage: check_symbols.sh LIBRARY CLIENT_H
set -eu
lib="$1"
header="$2"
syms=$(nm -D --defined-only "$lib" | awk '{print $3}')
[ -n "$syms" ] || { echo "no exported symbols in $lib"; exit 1; }
echo "$syms" | grep -q '^sf_client_open$' || { echo "sf_client_open not exported"; exit 1; }
# Under AddressSanitizer each exported global also gets an __odr_asan.<name>
# marker; it names the same sf_ object and is no extra API.
bad=$(echo "$syms" | grep -v -e '^sf_[a-z]' -e '^__odr_asan\.sf_[a-z]' || true)
if [ -n "$bad" ]; then
    echo "unexpected exported symbols:"; echo "$bad"; exit 1
fi
undeclared=$(echo "$syms" | grep -v '^__odr_asan\.' | while read -r s; do
    grep -q "[^a-z_0-9]$s[^a-z_0-9]" "$header" || echo "$s"
done)
if [ -n "$undeclared" ]; then
    echo "exported but not declared in $header:"; echo "$undeclared"; exit 1
fi
echo "exported: $(echo "$syms" | wc -l) sf_ symbols, each declared in client.h"
