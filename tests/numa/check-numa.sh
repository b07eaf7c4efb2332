#!/bin/sh
# Runs the NUMA test suite (run-suite.sh) in tools/numa-vm guests of several
# node counts, one boot per node count, and writes an automake-style
# test-suite.log whose summary (# PASS: N, ...) it also prints.
set -u

usage()
{
    cat <<'USAGE'
Usage: tests/numa/check-numa.sh --builddir DIR [--nodes "2 4"] [--log FILE]
                                [--hakmem-lib FILE] [--timeout SECONDS]
USAGE
}

suite_dir=$(cd "$(dirname "$0")" && pwd)
top_srcdir=$(cd "$suite_dir/../.." && pwd)
builddir=
node_counts="2 4"
log=tests/numa/test-suite.log
hakmem_lib=
timeout_s=300

while [ $# -gt 0 ]; do
    case $1 in
    --builddir) builddir=$2; shift 2 ;;
    --nodes) node_counts=$2; shift 2 ;;
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
set -- --carry "$suite_dir"
for program in numa_smoke numa_home; do
    if [ ! -x "$builddir/tests/numa/$program" ]; then
        echo "check-numa: $builddir/tests/numa/$program is not built" >&2
        exit 2
    fi
    set -- "$@" --carry "$builddir/tests/numa/$program"
done

# hakmem opens hwloc with dlopen, which ldd does not see: without it in the
# guest hakmem finds one node and the placement tests fail.
find_hwloc()
{
    /sbin/ldconfig -p 2>/dev/null | awk '$1 == "libhwloc.so.15" && /x86-64/ { print $NF; exit }'
}

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
    set -- "$@" --carry "$hakmem_lib" --carry "$hwloc"
else
    hakmem_lib=
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/check-numa.XXXXXX")
trap 'rm -rf "$work"' EXIT

for nodes in $node_counts; do
    started=$(date +%s.%N)
    "$top_srcdir/tools/numa-vm" --timeout "$timeout_s" "$@" "$nodes" \
        env NUMA_EXPECTED_NODES="$nodes" NUMA_BUILDDIR="$builddir" HAKMEM_LIB="$hakmem_lib" \
        sh "$suite_dir/run-suite.sh" >"$work/guest-$nodes.out" 2>&1
    status=$?
    elapsed=$(awk -v start="$started" -v end="$(date +%s.%N)" \
        'BEGIN { printf "%.1f", end - start }')
    # A guest that did not finish the suite counts as one error.
    if [ $status -ne 0 ]; then
        echo ":test-result: ERROR numa-vm (exit status $status)" >>"$work/guest-$nodes.out"
    fi
    echo "guest with $nodes nodes: ${elapsed}s" >"$work/guest-$nodes.time"
    awk -v nodes="$nodes" '/^:test-result: / { print $2 ": " $3 " [" nodes " nodes]" }' \
        "$work/guest-$nodes.out"
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
    echo "NUMA test suite (tests/numa), one tools/numa-vm guest per node count"
    echo
    cat "$work/summary"
    for nodes in $node_counts; do
        echo
        echo "--- $(cat "$work/guest-$nodes.time")"
        cat "$work/guest-$nodes.out"
    done
} >"$log"

echo "============================================================"
echo "NUMA suite summary (node counts: $node_counts)"
echo "============================================================"
cat "$work/summary"
cat "$work"/guest-*.time
echo "See $log"
! grep -qE '^# (FAIL|ERROR): [1-9]' "$work/summary"
