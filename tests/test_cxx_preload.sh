#!/bin/sh
# The C++ operators cost C programs nothing: libhakmem.so does not depend on
# libstdc++, and a C program that preloads it does not map libstdc++.  At
# HAKMEM_HARDEN=2 the operators pass test_cxx_operators again, and a sized
# delete with the wrong size is refused.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
prog=$builddir/tests/test_cxx_operators

for file in "$lib" "$prog"; do
    if [ ! -e "$file" ]; then
        echo "ERROR: $file does not exist: build it first (make check)"
        exit 99
    fi
done
if ! command -v readelf >/dev/null 2>&1; then
    echo "SKIP: readelf (binutils) is not installed"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test_cxx_operators.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
status=0

if readelf -d "$lib" | grep NEEDED | grep -q 'stdc++'; then
    echo "FAIL: $lib depends on libstdc++:"
    readelf -d "$lib" | grep NEEDED
    status=1
fi

# cat is a C program: it reads its own mappings.
LD_PRELOAD=$lib cat /proc/self/maps >"$work/maps"
if ! grep -q libhakmem "$work/maps"; then
    echo "ERROR: a preloaded cat does not map libhakmem"
    exit 99
fi
if grep -q 'stdc++' "$work/maps"; then
    echo "FAIL: a C program that preloads hakmem maps libstdc++:"
    grep 'stdc++' "$work/maps"
    status=1
fi

if ! HAKMEM_HARDEN=2 "$prog" >"$work/out" 2>&1; then
    echo "FAIL: test_cxx_operators fails at HAKMEM_HARDEN=2:"
    cat "$work/out"
    status=1
fi

HAKMEM_HARDEN=2 "$prog" --wrong-size >"$work/out" 2>&1
code=$?
if [ "$code" -eq 0 ] || ! grep -q 'hakmem: sized delete with the wrong size' "$work/out"; then
    echo "FAIL: at HAKMEM_HARDEN=2 a sized delete with the wrong size exited with $code:"
    cat "$work/out"
    status=1
fi

[ "$status" -eq 0 ] && echo "ok: no libstdc++ for C programs; checked sized deletes at level 2"
exit $status
