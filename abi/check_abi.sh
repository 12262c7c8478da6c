#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The ABI guard: fails on every incompatible change of libs3lect's ABI,
# passes on pure additions. Three checks, each catching what the others
# cannot see:
#   1. pins: abi/headertest.c with abi/pins.h compiles only if every public
#      enumerator keeps its value and every public function and callback type
#      keeps its type (enums travel as int, so abidiff cannot see them); linked
#      with LIB and run, it fails if an option's name or type changed (the
#      option table is in the library, not the header);
#   2. symbols: the library exports exactly abi/symbols.txt (nothing removed,
#      nothing exported by accident);
#   3. abidiff against abi/baseline.abi (public types only): any reported
#      change of an existing function fails; added functions do not count.
#
#   abi/check_abi.sh LIB BASELINE HEADERS_DIR [ABI_DIR]
# Regenerate the baseline only after a reviewed addition (docs/abi.md):
#   abidw --headers-dir libs3lect/include --drop-private-types \
#         --out-file abi/baseline.abi build/libs3lect/libs3lect.so
set -eu
lib=$1 baseline=$2 headers=$3
abi=${4:-$(cd "$(dirname "$0")" && pwd)}
cc=${CC:-cc}
fail=0
if ! "$cc" -std=c99 -pedantic -Wall -Wextra -Werror -fsyntax-only -I"$headers" -I"$abi" \
    "$abi/headertest.c"; then
    echo "abi: a pinned enumerator value or function type changed (see the error above)" >&2
    fail=1
fi
exe=$(mktemp)
if ! "$cc" -std=c99 -I"$headers" -I"$abi" "$abi/headertest.c" "$lib" -o "$exe" ||
    ! LD_LIBRARY_PATH="$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$exe"; then
    echo "abi: a pinned option's name or type changed, or headertest did not link and run" >&2
    fail=1
fi
rm -f "$exe"
exported=$(nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRVW]$/ {sub(/@.*/, "", $3); if ($3 != "S3LECT_0") print $3}' | sort -u)
expected=$(sort -u "$abi/symbols.txt")
if [ "$exported" != "$expected" ]; then
    echo "abi: exported symbols differ from abi/symbols.txt:" >&2
    diff -u "$abi/symbols.txt" - <<EOT >&2 || true
$exported
EOT
    fail=1
fi
if [ ! -f "$baseline" ]; then
    echo "abi: no ABI baseline at $baseline" >&2
    exit 1
fi
tmp=$(mktemp)
out=$(mktemp)
trap 'rm -f "$tmp" "$out"' EXIT
abidw --headers-dir "$headers" --drop-private-types --out-file "$tmp" "$lib"
set +e
abidiff --no-added-syms "$baseline" "$tmp" >"$out" 2>&1
rc=$?
set -e
# abidiff exit bits: 1 error, 2 usage, 4 ABI change, 8 incompatible change.
# With private types dropped and additions ignored, any bit is a break.
if [ "$rc" -ne 0 ]; then
    cat "$out" >&2
    echo "abi: abidiff reports a change of the existing ABI against $baseline (exit $rc)" >&2
    fail=1
fi
if [ "$fail" -ne 0 ]; then
    echo "abi: INCOMPATIBLE: the ABI only grows (docs/abi.md)" >&2
    exit 1
fi
echo "abi: compatible (pins hold, symbols match, abidiff exit 0)"
