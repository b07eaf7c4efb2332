#!/bin/sh
# The heap-fault suite (docs/harden/heap_faults.md): every fault of
# heap_faults (C, at each block size) and heap_faults_cxx (C++), each in a
# process of its own, under glibc's malloc, hakmem at HAKMEM_HARDEN=1 and 2,
# and on request other allocators.  Prints a table of which allocator caught
# which fault, and asserts that
#   - hakmem at level 1 catches every fault glibc catches, but those listed
#     in level2_only below, which level 2 must catch;
#   - hakmem at level 2 catches at least 85% of all the faults.
#
# A fault is caught when it does not go through: the process dies of
# SIGABRT, SIGSEGV, SIGBUS, SIGILL or SIGTRAP, or the faulty call fails as it
# must (exit status 3).  Exit status 0 means the program went on past the
# fault; 98 that the case does not apply (a realloc that did not move);
# SIGALRM, that the allocator hung.
#
#   test_heap_faults.sh [--others] [--sizes "8 4096 262144"] [--log DIR]
#     --others  also jemalloc, mimalloc and tcmalloc where installed (or set
#               HEAP_FAULTS_OTHERS=1); HEAP_FAULTS_ALLOCATORS="name=lib ..."
#               names any others
#     --sizes   the block sizes of the C faults
#     --log     keeps each run's stderr in DIR/ALLOCATOR/CASE@SIZE
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
faults=$builddir/tests/heap_faults
faults_cxx=$builddir/tests/heap_faults_cxx
sizes="8 4096 262144"
others=${HEAP_FAULTS_OTHERS:-0}
log=

while [ $# -gt 0 ]; do
    case $1 in
    --others) others=1 ;;
    --sizes) sizes=$2; shift ;;
    --log) log=$2; shift ;;
    *) echo "usage: $0 [--others] [--sizes \"8 4096 262144\"] [--log DIR]"; exit 99 ;;
    esac
    shift
done

for program in "$faults" "$faults_cxx" "$lib"; do
    if [ ! -e "$program" ]; then
        echo "ERROR: $program was not built (make check builds it)"
        exit 99
    fi
done

# Level 2 only: faults hakmem catches at HAKMEM_HARDEN=2 but not at 1,
# because catching them at level 1 would cost every malloc or free
# (docs/harden/heap_faults.md says what each would take).  CASE@SIZE.
level2_only="
write_under_1@8 write_under_1@4096
write_under_8@8 write_under_8@4096 write_under_8@262144
write_under_32@8 write_under_32@4096 write_under_32@262144
memcpy_under_16@4096 memcpy_under_16@262144
memset_under_8@8 memset_under_8@4096 memset_under_8@262144
memcpy_over@4096 memcpy_over_kept@4096
write_after_free_middle@262144
"


# name=library (empty: none) [VAR=VALUE]
allocators="glibc=
hakmem-h1=$lib HAKMEM_HARDEN=1
hakmem-h2=$lib HAKMEM_HARDEN=2"
if [ "$others" = 1 ]; then
    for other in jemalloc=libjemalloc.so.2 mimalloc=libmimalloc.so.2 \
        tcmalloc=libtcmalloc_minimal.so.4; do
        path=/usr/lib/x86_64-linux-gnu/${other#*=}
        if [ -e "$path" ]; then
            allocators="$allocators
${other%%=*}=$path"
        else
            echo "note: ${other%%=*} not installed ($path), left out"
        fi
    done
fi
for other in ${HEAP_FAULTS_ALLOCATORS:-}; do
    allocators="$allocators
$other"
done
names=$(echo "$allocators" | sed 's/=.*//')

work=$(mktemp -d "${TMPDIR:-/tmp}/test_heap_faults.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

# The outcome of one run, in a word; sets $outcome.
# run NAME LIBRARY [VAR=VALUE] -- PROGRAM ARGS...
run()
{
    name=$1
    library=$2
    shift 2
    setting=
    if [ "$1" != -- ]; then
        setting=$1
        shift
    fi
    shift
    err=$work/err
    if [ -n "$log" ]; then
        mkdir -p "$log/$name"
        err=$log/$name/$(echo "$2${3:+@$3}")
    fi
    (
        unset MALLOC_CHECK_ MALLOC_PERTURB_ HAKMEM_HARDEN
        [ -n "$setting" ] && export "${setting?}"
        [ -n "$library" ] && export LD_PRELOAD="$library"
        ulimit -c 0
        # Not exec: this shell, not the caller, says "Aborted" (into $err).
        "$@"
        exit $?
    ) >/dev/null 2>"$err"
    status=$?
    case $status in
    0) outcome=- ;;
    3) outcome=fails ;;
    98) outcome=n/a ;;
    134) outcome=ABRT ;;
    139) outcome=SEGV ;;
    135) outcome=BUS ;;
    132) outcome=ILL ;;
    133) outcome=TRAP ;;
    142) outcome=hang ;;
    *) outcome=status$status ;;
    esac
}

caught()
{
    case $1 in
    ABRT | SEGV | BUS | ILL | TRAP | fails) return 0 ;;
    esac
    return 1
}

listed()
{
    case " $(echo $2) " in
    *" $1 "*) return 0 ;;
    esac
    return 1
}

cases=
for fault in $("$faults" --list); do
    for size in $sizes; do
        cases="$cases $fault@$size"
    done
done
for fault in $("$faults_cxx" --list); do
    cases="$cases $fault"
done

failures=0
total=0
header=$(printf '%-30s' case)
column=0
for name in $names; do
    column=$((column + 1))
    header="$header $(printf '%-10s' "$name")"
    eval "caught_$column=0 applicable_$column=0"
done
echo "$header"
for case in $cases; do
    fault=${case%@*}
    size=${case#"$fault"}
    size=${size#@}
    if [ -n "$size" ]; then
        program="$faults $fault $size"
    else
        program="$faults_cxx $fault"
    fi
    total=$((total + 1))
    row=$(printf '%-30s' "$case")
    glibc= h1= h2=
    column=0
    while read -r spec; do
        column=$((column + 1))
        name=${spec%%=*}
        rest=${spec#*=}
        library=${rest%% *}
        setting=
        [ "$rest" != "$library" ] && setting=${rest#* }
        # shellcheck disable=SC2086
        run "$name" "$library" $setting -- $program
        if [ "$outcome" != n/a ]; then
            eval "applicable_$column=\$((applicable_$column + 1))"
            caught "$outcome" && eval "caught_$column=\$((caught_$column + 1))"
        fi
        case $name in
        glibc) glibc=$outcome ;;
        hakmem-h1) h1=$outcome ;;
        hakmem-h2) h2=$outcome ;;
        esac
        row="$row $(printf '%-10s' "$outcome")"
    done <<EOF
$allocators
EOF
    echo "$row"
    case "$glibc $h1 $h2" in
    *status* | *ERROR*)
        echo "FAIL: $case: a run ended with a status that means no outcome"
        failures=$((failures + 1))
        ;;
    esac
    if caught "$glibc" && ! caught "$h1"; then
        if listed "$case" "$level2_only"; then
            if ! caught "$h2"; then
                echo "FAIL: $case: glibc catches it, hakmem at level 2 does not"
                failures=$((failures + 1))
            fi
        else
            echo "FAIL: $case: glibc catches it, hakmem at level 1 does not"
            failures=$((failures + 1))
        fi
    fi
done

summary=$(printf '%-30s' "caught of $total")
column=0
for name in $names; do
    column=$((column + 1))
    eval "caught=\$caught_$column applicable=\$applicable_$column"
    summary="$summary $(printf '%-10s' "$caught/$applicable")"
    [ "$name" = hakmem-h2 ] && h2_caught=$caught
done
echo "$summary"

if [ $((h2_caught * 100)) -lt $((total * 85)) ]; then
    echo "FAIL: hakmem at level 2 catches $h2_caught of $total, under 85%"
    failures=$((failures + 1))
fi
echo "$failures failure(s)"
[ "$failures" -eq 0 ]
