#!/bin/sh
# The C++ operators cost C programs nothing: libhakmem.so does not depend on
# libstdc++, and a C program that preloads it does not map libstdc++.  At
# HAKMEM_HARDEN=2 the operators pass test_cxx_operators again, and a sized
# delete with the wrong size is refused; cxx_replaced_new, which replaces
# operator new and delete over blocks with a header, passes there too (no
# size check on its blocks).  A C++ plugin that a C program dlopens gets
# std::bad_alloc from a failing new.  new throws std::bad_alloc when the
# address space runs out (ulimit -v), and a double delete or a delete inside
# a block stops with hakmem's message at levels 1 and 2, as free does.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
prog=$builddir/tests/test_cxx_operators
replaced=$builddir/tests/cxx_replaced_new

for file in "$lib" "$prog" "$replaced"; do
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

if ! HAKMEM_HARDEN=2 "$replaced" >"$work/out" 2>&1; then
    echo "FAIL: cxx_replaced_new fails at HAKMEM_HARDEN=2:"
    cat "$work/out"
    status=1
fi

# A C program that dlopens a C++ plugin (RTLD_LOCAL) after hakmem bound its
# weak references to libstdc++, to nothing: the plugin's failing new throws.
host=$builddir/tests/cxx_plugin_host
plugin=$builddir/tests/.libs/cxx_plugin.so
if [ ! -e "$host" ] || [ ! -e "$plugin" ]; then
    echo "ERROR: $host or $plugin does not exist: build them first (make check)"
    exit 99
fi
if ! LD_PRELOAD=$lib "$host" "$plugin" >"$work/out" 2>&1; then
    echo "FAIL: a C program's C++ plugin, under hakmem, did not get std::bad_alloc:"
    cat "$work/out"
    status=1
fi

for misuse in --wrong-size --wrong-alignment; do
    HAKMEM_HARDEN=2 "$prog" $misuse >"$work/out" 2>&1
    code=$?
    if [ "$code" -eq 0 ] ||
        ! grep -q 'hakmem: sized delete with the wrong size or alignment' "$work/out"; then
        echo "FAIL: at HAKMEM_HARDEN=2 $misuse exited with $code:"
        cat "$work/out"
        status=1
    fi
done

# 1 GiB of address space: the program's own mappings fit, 64 MiB blocks
# soon do not.
(ulimit -v 1048576 && "$prog" --exhaust) >"$work/out" 2>&1
code=$?
if [ "$code" -ne 0 ] || ! grep -q '^std::bad_alloc after' "$work/out"; then
    echo "FAIL: under ulimit -v, new did not throw std::bad_alloc (exit $code):"
    cat "$work/out"
    status=1
fi

for level in 1 2; do
    for misuse in double-delete:'hakmem: double free' \
        interior-delete:'hakmem: free of a pointer inside a block'; do
        HAKMEM_HARDEN=$level "$prog" "--${misuse%%:*}" >"$work/out" 2>&1
        code=$?
        if [ "$code" -eq 0 ] || ! grep -q "${misuse#*:}" "$work/out"; then
            echo "FAIL: --${misuse%%:*} at HAKMEM_HARDEN=$level exited with $code, without '${misuse#*:}':"
            cat "$work/out"
            status=1
        fi
    done
done

[ "$status" -eq 0 ] && echo "ok: no libstdc++ for C programs; sized deletes checked at level 2; replaced operators and plugins; bad_alloc under ulimit -v; misused deletes stopped"
exit $status
