#!/bin/sh
# The rest of the suite runs at the default hardening level (1); this runs
# the API, thread, fork and stress programs and the fuzz corpus again at
# HAKMEM_HARDEN=0 (plain links, unchecked frees) and 2 (checked mode: every
# block with its canary, guard pages), where other code paths serve every
# malloc and free.  HAKMEM_STATS shows that the level was in effect.  Real
# programs (real_programs.sh, which runs them at level 1) must give the same
# output at levels 0 and 2 too: no canary or guard page may fire on a correct
# program, and no level may change what a program prints.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
srcdir=${HAKMEM_SRCDIR:-$builddir}
corpus=$srcdir/tests/reliability/corpus
failures=0
runs=0

work=$(mktemp -d "${TMPDIR:-/tmp}/test_harden_levels.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

# run LEVEL PROGRAM ARGS...
run()
{
    level=$1
    shift
    program=$1
    if [ ! -x "$program" ]; then
        echo "ERROR: $program was not built (make check builds it)"
        exit 99
    fi
    name=$(basename "$program")
    runs=$((runs + 1))
    HAKMEM_HARDEN=$level HAKMEM_STATS=1 HAKMEM_STRESS_SECONDS=2 "$@" \
        >"$work/out" 2>"$work/err"
    status=$?
    if [ "$status" -eq 77 ]; then
        echo "skip: $name at HAKMEM_HARDEN=$level: $(tail -n 1 "$work/out")"
    elif [ "$status" -ne 0 ]; then
        echo "FAIL: $name at HAKMEM_HARDEN=$level exited with status $status:"
        tail -n 20 "$work/err" "$work/out"
        failures=$((failures + 1))
    elif ! grep -Eq "^ *HAKMEM_HARDEN +$level " "$work/err"; then
        echo "FAIL: $name at HAKMEM_HARDEN=$level: the statistics show another level:"
        grep HAKMEM_HARDEN "$work/err"
        failures=$((failures + 1))
    else
        echo "ok: $name at HAKMEM_HARDEN=$level"
    fi
}

for level in 0 2; do
    for test in test_api test_large_split test_realloc_growth test_threads test_remote_free \
        test_thread_churn test_fork test_fork_in_handler test_foreign test_calloc; do
        run "$level" "$builddir/tests/$test"
    done
    run "$level" "$builddir/tests/reliability/larson"
    run "$level" "$builddir/tests/reliability/teardown_stress"
    run "$level" "$builddir/tests/reliability/fuzz_replay" "$corpus" --random=300 --seed=7
done

for level in 0 2; do
    runs=$((runs + 1))
    HAKMEM_HARDEN=$level sh "$srcdir/tests/reliability/real_programs.sh" >"$work/out" 2>&1
    status=$?
    if [ "$status" -eq 0 ] || [ "$status" -eq 77 ]; then
        echo "ok: real programs at HAKMEM_HARDEN=$level: $(tail -n 1 "$work/out")"
    else
        echo "FAIL: real programs at HAKMEM_HARDEN=$level (status $status):"
        tail -n 30 "$work/out"
        failures=$((failures + 1))
    fi
done

echo "$runs runs, $failures failure(s)"
[ "$failures" -eq 0 ]
