#!/bin/sh
# Valgrind's memcheck over the stress programs with hakmem preloaded, for a
# bounded run: memcheck must find no error in hakmem's code (reads of
# uninitialised memory, accesses outside any mapping, bad system call
# arguments).  Memcheck replaces every malloc it finds, hakmem's included,
# unless told to leave user libraries alone (somalloc=nouserintercepts);
# HAKMEM_STATS then shows that hakmem served the allocations.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
seconds=${HAKMEM_VALGRIND_SECONDS:-2}
# Distinguishes memcheck's verdict from the program's own exit status.
memcheck_error=97

if ! command -v valgrind >/dev/null 2>&1; then
    echo "SKIP: valgrind is not installed (Debian: apt-get install valgrind)"
    exit 77
fi
if [ ! -f "$lib" ]; then
    echo "ERROR: $lib does not exist: build the library first (make)"
    exit 99
fi
canary=$builddir/tests/reliability/memcheck_canary
if [ ! -x "$canary" ]; then
    echo "ERROR: $canary was not built (make check builds it)"
    exit 99
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/valgrind_stress.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
failures=0
passes=0

# memcheck NAME PRELOAD COMMAND...: runs COMMAND under memcheck, with
# LD_PRELOAD=PRELOAD when that is not empty; the status is memcheck's.
memcheck()
{
    name=$1
    preload=$2
    shift 2
    if [ -n "$preload" ]; then
        LD_PRELOAD=$preload valgrind --error-exitcode=$memcheck_error \
            --soname-synonyms=somalloc=nouserintercepts --log-file="$work/$name.valgrind" \
            "$@" >"$work/$name.out" 2>&1
    else
        valgrind --error-exitcode=$memcheck_error --log-file="$work/$name.valgrind" \
            "$@" >"$work/$name.out" 2>&1
    fi
}

# Memcheck must be able to fail here, or its silence below means nothing.
memcheck canary "" "$canary" stack
status=$?
if [ "$status" -ne "$memcheck_error" ] ||
    ! grep -q "uninitialised value" "$work/canary.valgrind"; then
    echo "ERROR: memcheck missed an uninitialised stack value (status $status):"
    tail -n 20 "$work/canary.valgrind"
    exit 99
fi
echo "ok: memcheck reports a branch on an uninitialised stack value"

# Informational until hakmem describes its blocks to valgrind with client
# requests: memcheck cannot see a program's errors inside hakmem's blocks.
memcheck heap_canary "$lib" "$canary" heap
if [ $? -eq "$memcheck_error" ]; then
    echo "note: memcheck sees uninitialised reads in hakmem's blocks"
else
    echo "note: memcheck does not see uninitialised reads in hakmem's blocks" \
        "(hakmem makes no valgrind client requests)"
fi

# run_stress NAME PROGRAM: PROGRAM under memcheck with hakmem preloaded.
run_stress()
{
    name=$1
    program=$2
    if [ ! -x "$program" ]; then
        echo "ERROR: $program was not built (make check builds it)"
        exit 99
    fi
    started=$(date +%s)
    HAKMEM_STRESS_SECONDS=$seconds HAKMEM_STATS=1 memcheck "$name" "$lib" "$program"
    status=$?
    elapsed=$(($(date +%s) - started))
    if [ "$status" -eq "$memcheck_error" ]; then
        echo "FAIL: memcheck found errors in $name; its report:"
        grep -v '^==[0-9]*== *$' "$work/$name.valgrind" | head -n 60
        failures=$((failures + 1))
    elif [ "$status" -ne 0 ]; then
        echo "FAIL: $name exited with status $status under memcheck:"
        tail -n 20 "$work/$name.out"
        tail -n 20 "$work/$name.valgrind"
        failures=$((failures + 1))
    elif ! grep -q "hakmem statistics" "$work/$name.out"; then
        echo "FAIL: $name ran without hakmem under memcheck (no HAKMEM_STATS output)"
        failures=$((failures + 1))
    else
        summary=$(grep -h "all checks passed\|objects replaced\|producer threads" \
            "$work/$name.out" | head -n 1)
        echo "ok: $name under memcheck, ${elapsed} s, no errors: $summary"
        passes=$((passes + 1))
    fi
}

run_stress larson "$builddir/tests/reliability/larson"
run_stress teardown_stress "$builddir/tests/reliability/teardown_stress"
run_stress test_threads "$builddir/tests/test_threads"

echo "$passes stress programs clean under memcheck, $failures failure(s)"
[ "$failures" -eq 0 ]
