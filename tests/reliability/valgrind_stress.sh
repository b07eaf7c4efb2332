#!/bin/sh
# Valgrind's memcheck with hakmem preloaded.  hakmem's client requests
# (src/memcheck.h) must let memcheck report a program's own bugs in hakmem's
# blocks: an uninitialised read (traced to a heap allocation), a use after
# free, a read past a block, a leak.  And over the stress programs, for a
# bounded run, memcheck must find no error in hakmem's code (reads of
# uninitialised memory, accesses outside any mapping or to its own free
# blocks, bad system call arguments).  Memcheck replaces every malloc it
# finds, hakmem's included, unless told to leave user libraries alone
# (somalloc=nouserintercepts); HAKMEM_STATS then shows that hakmem served
# the allocations.
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
# A valgrind that cannot read the library's debug information gives up on
# every program (3.19 on clang 14's DWARF 5): the suite cannot run there.
if ! LD_PRELOAD=$lib valgrind --log-file="$work/probe.valgrind" /bin/true >/dev/null 2>&1 &&
    grep -q "debuginfo reader" "$work/probe.valgrind"; then
    echo "SKIP: $(valgrind --version) cannot read the debug information of $lib;" \
        "build with -gdwarf-4 to run this suite"
    exit 77
fi
failures=0
passes=0

# memcheck NAME PRELOAD COMMAND...: runs COMMAND under memcheck, with
# LD_PRELOAD=PRELOAD when that is not empty, and valgrind's options in
# $memcheck_options besides; the status is memcheck's.
memcheck_options=
memcheck()
{
    name=$1
    preload=$2
    shift 2
    if [ -n "$preload" ]; then
        # shellcheck disable=SC2086 # the options are words
        LD_PRELOAD=$preload valgrind --error-exitcode=$memcheck_error $memcheck_options \
            --soname-synonyms=somalloc=nouserintercepts --log-file="$work/$name.valgrind" \
            "$@" >"$work/$name.out" 2>&1
    else
        # shellcheck disable=SC2086
        valgrind --error-exitcode=$memcheck_error $memcheck_options \
            --log-file="$work/$name.valgrind" "$@" >"$work/$name.out" 2>&1
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

# client_bug MODE WHAT TEXT...: memcheck_canary MODE, a program's own bug
# (WHAT) in a hakmem block, must be reported, with every TEXT in memcheck's
# report.
client_bug()
{
    mode=$1
    what=$2
    shift 2
    memcheck_options="--leak-check=full --track-origins=yes"
    memcheck "$mode" "$lib" "$canary" "$mode"
    status=$?
    memcheck_options=
    missing=
    for text in "$@"; do
        grep -qF "$text" "$work/$mode.valgrind" || missing="$missing '$text'"
    done
    if [ "$status" -ne "$memcheck_error" ] || [ -n "$missing" ]; then
        echo "FAIL: memcheck did not report the program's $what in a hakmem block" \
            "(status $status; missing:$missing); its report:"
        grep -v '^==[0-9]*== *$' "$work/$mode.valgrind" | head -n 30
        failures=$((failures + 1))
    else
        echo "ok: memcheck reports the program's $what in a hakmem block"
        passes=$((passes + 1))
    fi
}

if grep -q "define HAVE_VALGRIND_MEMCHECK_H 1" "$builddir/config.h" 2>/dev/null; then
    client_bug heap "uninitialised read" "Uninitialised value was created by a heap allocation"
    client_bug use-after-free "use after free" "Invalid read of size 1" \
        "0 bytes inside a block of size 64 free'd"
    client_bug overflow "read past the end" "Invalid read of size 1" \
        "0 bytes after a block of size 100 alloc'd"
    client_bug leak "leak" "100 bytes in 1 blocks are definitely lost"
else
    echo "note: hakmem was built without valgrind/memcheck.h: no client requests to check"
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

echo "$passes checks passed under memcheck, $failures failure(s)"
[ "$failures" -eq 0 ]
