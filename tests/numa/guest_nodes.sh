#!/bin/sh
# The guest has the nodes it was booted with, numbered from 0, each with CPUs
# and memory, and numactl sees the same.
expected=${NUMA_EXPECTED_NODES:?}
failed=0

fail()
{
    echo "FAIL: $*"
    failed=1
}

online=$(cat /sys/devices/system/node/online)
[ "$online" = "0-$((expected - 1))" ] || fail "online nodes are '$online', not 0-$((expected - 1))"

count=0
for dir in /sys/devices/system/node/node[0-9]*; do
    node=${dir##*/node}
    cpus=$(cat "$dir/cpulist")
    memory_kib=$(awk '/MemTotal:/ { print $4 }' "$dir/meminfo")
    echo "node $node: CPUs ${cpus:-none}, ${memory_kib:-0} KiB of memory"
    [ -n "$cpus" ] || fail "node $node has no CPUs"
    [ "${memory_kib:-0}" -gt 0 ] || fail "node $node has no memory"
    count=$((count + 1))
done
[ "$count" -eq "$expected" ] || fail "$count nodes in sysfs, not $expected"

numactl --hardware | grep '^available:'
numactl --hardware | grep -q "^available: $expected nodes" || fail "numactl disagrees"

exit $failed
