#!/bin/sh
# hwloc is loaded lazily (issue 8): a process under the preloaded library
# maps libhwloc only where it may allocate from several NUMA nodes, and only
# once it has done what makes discovery worth it.  HAKMEM_LIB and HAKMEM_BUILDDIR
# come from the test environment (tests/local.mk).
set -u

probe="$HAKMEM_BUILDDIR/tests/hwloc_probe"
if [ ! -f "$HAKMEM_LIB" ] || [ ! -x "$probe" ]; then
    echo "missing $HAKMEM_LIB or $probe" >&2
    exit 99
fi

fail=0
check() { # name expected actual
    if [ "$2" = "$3" ]; then
        echo "ok: $1: $3"
    else
        echo "FAIL: $1: got '$3', expected '$2'" >&2
        fail=1
    fi
}

run_probe() {
    LD_PRELOAD="$HAKMEM_LIB" "$probe" "$@" || echo "probe failed ($?)"
}

# The nodes the process may allocate from (its cpuset's), as hakmem counts
# them at start-up; without cpusets, the nodes with memory (the kernel's
# answer then), or online.
nodes=$(awk '/^Mems_allowed_list:/ { print $2 }' /proc/self/status 2>/dev/null)
for list in has_memory online; do
    if [ -z "$nodes" ]; then
        nodes=$(cat "/sys/devices/system/node/$list" 2>/dev/null)
    fi
done
case ${nodes:-0} in
    *,* | *-*) several=yes ;;
    *) several=no ;;
esac

check "HAKMEM_NUMA=off" "hwloc not mapped" "$(HAKMEM_NUMA=off run_probe)"
if [ $several = no ]; then
    check "one node (${nodes:-no NUMA support})" "hwloc not mapped" "$(run_probe)"
else
    check "nodes $nodes" "hwloc mapped" "$(run_probe)"
fi
exit $fail
