#!/bin/sh
# Fails when the built library's ABI is incompatible with abi/baseline.abi.
# Regenerate the baseline only for a deliberate, documented ABI change:
#   abidw --headers-dir libs3lect/include --out-file abi/baseline.abi build/libs3lect/libs3lect.so
set -eu
lib=$1 baseline=$2 headers=$3
if [ ! -f "$baseline" ]; then
    echo "no ABI baseline at $baseline" >&2
    exit 1
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
abidw --headers-dir "$headers" --out-file "$tmp" "$lib"
set +e
abidiff --no-added-syms "$baseline" "$tmp"
rc=$?
set -e
# abidiff exit bits: 4 = ABI change (compatible, e.g. additions), 8 = incompatible change.
if [ $((rc & 8)) -ne 0 ] || [ $((rc & 1)) -ne 0 ] || [ $((rc & 2)) -ne 0 ]; then
    echo "abidiff: incompatible ABI change against $baseline (exit $rc)" >&2
    exit 1
fi
echo "abi: compatible with baseline (abidiff exit $rc)"
