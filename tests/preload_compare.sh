# Sourced by the tests that run real programs with and without hakmem
# preloaded and require the same output (test_preload.sh,
# reliability/real_programs.sh).  The sourcing script sets preload_test to
# its name first, and ends with preload_finish.

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
if [ ! -f "$lib" ]; then
    echo "ERROR: $lib does not exist: build the library first (make)"
    exit 99
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/$preload_test.XXXXXX") || exit 99
# A server the script started in the background, stopped on any exit.
background_pid=
preload_cleanup()
{
    if [ -n "$background_pid" ]; then
        kill "$background_pid" 2>/dev/null
    fi
    rm -rf "$work"
}
trap preload_cleanup EXIT

failures=0
passes=0
# Outputs must not depend on the locale or on Python's hash seed.
LC_ALL=C
PYTHONHASHSEED=0
export LC_ALL PYTHONHASHSEED

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

skip()
{
    echo "SKIP: $1 is not installed (Debian: apt-get install $2)"
}

# preloaded COMMAND...: runs COMMAND with the library of the current run.
preloaded()
{
    LD_PRELOAD=$HAKMEM_PRELOAD "$@"
}

# compare NAME COMMAND...: runs COMMAND twice, the second time with
# HAKMEM_PRELOAD set to the library, which COMMAND preloads into the programs
# it starts (through preloaded, or LD_PRELOAD=$HAKMEM_PRELOAD).  run_tag is
# NAME.plain or NAME.hakmem meanwhile, for scratch files.  Exit status and
# standard output must match.
compare()
{
    name=$1
    shift
    HAKMEM_PRELOAD=
    run_tag=$name.plain
    "$@" >"$work/$name.plain.out" 2>"$work/$name.plain.err"
    plain_status=$?
    if [ "$plain_status" -ne 0 ]; then
        echo "ERROR: $name fails even without hakmem (status $plain_status):"
        tail -n 20 "$work/$name.plain.err"
        exit 99
    fi
    HAKMEM_PRELOAD=$lib
    run_tag=$name.hakmem
    "$@" >"$work/$name.hakmem.out" 2>"$work/$name.hakmem.err"
    hakmem_status=$?
    HAKMEM_PRELOAD=
    if [ "$hakmem_status" -ne 0 ]; then
        fail "$name exits with status $hakmem_status under hakmem (0 without); its stderr:"
        tail -n 20 "$work/$name.hakmem.err"
        return 1
    fi
    if ! cmp -s "$work/$name.plain.out" "$work/$name.hakmem.out"; then
        fail "$name prints different output under hakmem; first differences:"
        diff "$work/$name.plain.out" "$work/$name.hakmem.out" | head -n 10
        return 1
    fi
    echo "ok: $name, $(wc -c <"$work/$name.plain.out") bytes of identical output"
    passes=$((passes + 1))
    return 0
}

preload_finish()
{
    echo "$passes programs gave identical output under hakmem, $failures failure(s)"
    if [ "$failures" -ne 0 ]; then
        exit 1
    fi
    if [ "$passes" -eq 0 ]; then
        exit 77
    fi
    exit 0
}
