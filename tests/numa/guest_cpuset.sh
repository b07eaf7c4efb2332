#!/bin/sh
# hakmem counts the nodes a process may allocate from, not those online: in
# a cgroup whose cpuset has one memory node, a process says it runs on one
# node (HAKMEM_STATS=1) and never loads hwloc; beside it, outside the
# cgroup, the same program loads the topology (hwloc, or the kernel's lists
# where the guest has no libhwloc).  Skips where the guest kernel has no
# cgroup2 cpuset controller, and on a guest with one node with memory.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
if ! grep -q '[-,]' /sys/devices/system/node/has_memory; then
    echo "SKIP: one node with memory: nothing for a cpuset to narrow"
    exit 77
fi
probe="$NUMA_BUILDDIR/tests/hwloc_probe"
cgroup=/sys/fs/cgroup
mounted=false
if ! grep -q " $cgroup cgroup2 " /proc/mounts; then
    mkdir -p "$cgroup" && mount -t cgroup2 none "$cgroup" 2>/dev/null && mounted=true
fi
enabled=false
if grep -qw cpuset "$cgroup/cgroup.controllers" 2>/dev/null &&
    { echo +cpuset >"$cgroup/cgroup.subtree_control"; } 2>/dev/null; then
    enabled=true
fi
group=$cgroup/hakmem-one-node
# Leaves the guest's cgroups as they were, for the tests after this one.
# shellcheck disable=SC2317 # called by the trap
clean_up()
{
    rmdir "$group" 2>/dev/null
    if $enabled; then
        { echo -cpuset >"$cgroup/cgroup.subtree_control"; } 2>/dev/null
    fi
    if $mounted; then
        umount "$cgroup"
    fi
}
trap clean_up EXIT
if ! $enabled; then
    echo "SKIP: no cgroup2 cpuset controller in this guest"
    exit 77
fi
mkdir -p "$group"
first=$(sed 's/[-,].*//' /sys/devices/system/node/has_memory)
if ! echo "$first" >"$group/cpuset.mems"; then
    echo "ERROR: cannot set cpuset.mems to $first"
    exit 99
fi
failed=0

# Runs the probe under hakmem in the cgroup (in) or beside it (out); prints
# its output, the statistics included.
# shellcheck disable=SC2016 # $$ and $1, $2 are the inner shell's
run()
{
    if [ "$1" = in ]; then
        HAKMEM_STATS=1 LD_PRELOAD=$HAKMEM_LIB sh -c \
            'echo $$ >"$1/cgroup.procs" && exec "$2"' sh "$group" "$probe" 2>&1
    else
        HAKMEM_STATS=1 LD_PRELOAD=$HAKMEM_LIB "$probe" 2>&1
    fi
}

expect()
{
    if echo "$2" | grep -qxE -- "$3"; then
        echo "ok ($1): $3"
    else
        echo "FAIL ($1): no line '$3' in:"
        echo "$2" | sed -n '/hwloc/p;/^topology: /p'
        failed=1
    fi
}

inside=$(run in)
expect "cpuset.mems $first" "$inside" "hwloc not mapped"
expect "cpuset.mems $first" "$inside" \
    "topology: one node \(the process may allocate from one\)"
expect "every node" "$(run out)" "topology: (hwloc 2\.|sysfs ).*"
exit $failed
