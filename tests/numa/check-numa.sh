#!/bin/sh
# Runs the NUMA test suite (run-suite.sh) in tools/numa-vm guests of several
# machine shapes (tools/numa-vm --list-shapes), one boot per shape, and
# writes an automake-style test-suite.log whose summary (# PASS: N, ...) it
# also prints.  Each result is tagged with its shape: PASS: guest_nodes [smt].
set -u

usage()
{
    cat <<'USAGE'
Usage: tests/numa/check-numa.sh --builddir DIR [--shapes "SHAPE..."] [--log FILE]
                                [--hakmem-lib FILE] [--timeout SECONDS]

The shape no-hwloc boots without libhwloc, which every other shape carries.
USAGE
}

suite_dir=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$suite_dir/../.." && pwd)
numa_vm=$top_srcdir/tools/numa-vm
builddir=
shapes="pkg-per-node-2 snc-2 pkgs-2-per-node smt cxl no-hwloc uneven sparse 4-nodes 8-nodes"
log=tests/numa/test-suite.log
hakmem_lib=
timeout_s=300

while [ $# -gt 0 ]; do
    case $1 in
    --builddir) builddir=$2; shift 2 ;;
    --shapes) shapes=$2; shift 2 ;;
    --log) log=$2; shift 2 ;;
    --hakmem-lib) hakmem_lib=$2; shift 2 ;;
    --timeout) timeout_s=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; exit 2 ;;
    esac
done
if [ -z "$builddir" ]; then
    usage >&2
    exit 2
fi
builddir=$(cd "$builddir" && pwd)
known_shapes=$("$numa_vm" --list-shapes | awk '/^[^ ]/ { print $1 }')
for shape in $shapes; do
    if ! echo "$known_shapes" | grep -qx -- "$shape"; then
        echo "check-numa: no shape '$shape'; tools/numa-vm --list-shapes lists them" >&2
        exit 2
    fi
done
set -- --carry "$suite_dir"
for program in numa_smoke numa_home large_churn phase_churn; do
    if [ ! -x "$builddir/tests/numa/$program" ]; then
        echo "check-numa: $builddir/tests/numa/$program is not built" >&2
        exit 2
    fi
    set -- "$@" --carry "$builddir/tests/numa/$program"
done
# guest_lend.sh runs the lending unit test on the guest's kernel.
if [ ! -x "$builddir/tests/unit/test_lend" ]; then
    echo "check-numa: $builddir/tests/unit/test_lend is not built" >&2
    exit 2
fi
set -- "$@" --carry "$builddir/tests/unit/test_lend"
# guest_topology.sh reads HAKMEM_STATS's report of a process that loads the
# topology.
if [ ! -x "$builddir/tests/hwloc_probe" ]; then
    echo "check-numa: $builddir/tests/hwloc_probe is not built" >&2
    exit 2
fi
set -- "$@" --carry "$builddir/tests/hwloc_probe"

# hakmem opens hwloc with dlopen, which ldd does not see: it is carried into
# every guest but no-hwloc's, where hakmem must make do with sysfs.
find_hwloc()
{
    /sbin/ldconfig -p 2>/dev/null | awk '$1 == "libhwloc.so.15" && /x86-64/ { print $NF; exit }'
}

hwloc=
if [ -f "$hakmem_lib" ]; then
    hwloc=$(find_hwloc)
    if [ -z "$hwloc" ] && [ "$(id -u)" -eq 0 ]; then
        echo "check-numa: installing libhwloc15 (hakmem loads it at run time)"
        apt-get install -y -q libhwloc15 >/dev/null
        hwloc=$(find_hwloc)
    fi
    if [ -z "$hwloc" ]; then
        echo "check-numa: libhwloc.so.15 is not installed (apt-get install libhwloc15)" >&2
        exit 2
    fi
    set -- "$@" --carry "$hakmem_lib"
else
    hakmem_lib=
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/check-numa.XXXXXX")
trap 'rm -rf "$work"' EXIT

for shape in $shapes; do
    shape_hwloc=$hwloc
    if [ "$shape" = no-hwloc ]; then
        shape_hwloc=
    fi
    started=$(date +%s.%N)
    "$numa_vm" --shape "$shape" --timeout "$timeout_s" "$@" ${shape_hwloc:+--carry "$shape_hwloc"} \
        env NUMA_BUILDDIR="$builddir" HAKMEM_LIB="$hakmem_lib" \
        sh "$suite_dir/run-suite.sh" >"$work/guest-$shape.out" 2>&1
    status=$?
    elapsed=$(awk -v start="$started" -v end="$(date +%s.%N)" \
        'BEGIN { printf "%.1f", end - start }')
    # A guest that did not finish the suite counts as one error.
    if [ $status -ne 0 ]; then
        echo ":test-result: ERROR numa-vm (exit status $status)" >>"$work/guest-$shape.out"
    fi
    echo "guest $shape: ${elapsed}s" >"$work/guest-$shape.time"
    awk -v shape="$shape" '/^:test-result: / { print $2 ": " $3 " [" shape "]" }' \
        "$work/guest-$shape.out"
done

mkdir -p "$(dirname "$log")"
{
    awk '/^:test-result: / { count[$2]++; total++ }
        END {
            print "# TOTAL: " total + 0
            split("PASS SKIP XFAIL FAIL XPASS ERROR", results, " ")
            for (i = 1; i <= 6; i++)
                print "# " results[i] ": " count[results[i]] + 0
        }' "$work"/guest-*.out
} >"$work/summary"

{
    echo "NUMA test suite (tests/numa), one tools/numa-vm guest per machine shape"
    echo
    cat "$work/summary"
    for shape in $shapes; do
        echo
        echo "--- $(cat "$work/guest-$shape.time")"
        cat "$work/guest-$shape.out"
    done
} >"$log"

echo "============================================================"
echo "NUMA suite summary (shapes: $shapes)"
echo "============================================================"
cat "$work/summary"
for shape in $shapes; do
    cat "$work/guest-$shape.time"
done
echo "See $log"
! grep -qE '^# (FAIL|ERROR): [1-9]' "$work/summary"
