#!/bin/sh
# HAKMEM_STATS=1 says where hakmem's topology came from and which CPUs each
# node got, and both are right on every shape: hwloc checked against the
# kernel's lists where libhwloc is in the guest, the kernel's lists (sysfs)
# where it is not, and each node's CPUs exactly those the kernel lists under
# it (none for a memory-only node).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
output=$(HAKMEM_STATS=1 LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/hwloc_probe" 2>&1)
status=$?
if [ $status -ne 0 ]; then
    echo "ERROR: hwloc_probe exited with status $status"
    echo "$output"
    exit 99
fi
echo "$output" | sed -n '/^topology: /,/^process_minor_faults/p'
failed=0

source=$(echo "$output" | grep '^topology: ')
have_hwloc=false
for dir in /lib/x86_64-linux-gnu /usr/lib/x86_64-linux-gnu /lib64 /usr/lib64; do
    if [ -f "$dir/libhwloc.so.15" ]; then
        have_hwloc=true
    fi
done
if $have_hwloc; then
    expected='^topology: hwloc 2\.[0-9.]* (the kernel.s lists agree), [0-9]* us$'
else
    expected='^topology: sysfs (libhwloc\.so\.15 not found), [0-9]* us$'
fi
if ! echo "$source" | grep -q "$expected"; then
    echo "FAIL: the source line is '$source', expected /$expected/"
    failed=1
fi

# Every node with memory has a line, in OS order, with the CPUs the kernel
# lists under it.
expand()
{
    echo "$1" | awk -F, '{
        for (i = 1; i <= NF; i++) {
            n = split($i, range, "-")
            for (v = range[1]; v <= range[n]; v++)
                print v
        }
    }'
}
index=0
for os in $(expand "$(cat /sys/devices/system/node/has_memory)"); do
    cpus=$(cat "/sys/devices/system/node/node$os/cpulist")
    if [ -n "$cpus" ]; then
        want="  node $index (os $os): cpus $cpus"
    else
        want="  node $index (os $os): no CPUs"
    fi
    if echo "$output" | grep -qxF "$want"; then
        echo "ok: $want"
    else
        echo "FAIL: no line '$want'"
        failed=1
    fi
    index=$((index + 1))
done
exit $failed
