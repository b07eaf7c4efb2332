#!/bin/sh
# The guest has the nodes its shape gives it (NUMA_VM_NODES, numbered as
# there, with holes where nodes are absent), each with memory, and CPUs on
# exactly the nodes of NUMA_VM_CPU_NODES (the others are memory-only); numactl
# sees the same nodes.
expected=${NUMA_VM_NODES:?}
cpu_nodes=${NUMA_VM_CPU_NODES:?}
failed=0

fail()
{
    echo "FAIL: $*"
    failed=1
}

# "0 1 2 5" as the kernel writes it: 0-2,5
kernel_list()
{
    echo "$*" | awk '{
        list = ""
        for (i = 1; i <= NF; i = j + 1) {
            for (j = i; j < NF && $(j + 1) == $j + 1; j++)
                ;
            list = list (list == "" ? "" : ",") (j > i ? $i "-" $j : $i)
        }
        print list
    }'
}

online=$(cat /sys/devices/system/node/online)
[ "$online" = "$(kernel_list $expected)" ] ||
    fail "online nodes are '$online', not $(kernel_list $expected)"

found=
for dir in /sys/devices/system/node/node[0-9]*; do
    found="$found ${dir##*/node}"
done
found=$(echo $found | tr ' ' '\n' | sort -n | tr '\n' ' ')
[ "$found" = "$expected " ] || fail "sysfs has nodes $found, not $expected"

for node in $expected; do
    dir=/sys/devices/system/node/node$node
    cpus=$(cat "$dir/cpulist" 2>/dev/null)
    memory_kib=$(awk '/MemTotal:/ { print $4 }' "$dir/meminfo" 2>/dev/null)
    echo "node $node: CPUs ${cpus:-none}, ${memory_kib:-0} KiB of memory"
    if echo " $cpu_nodes " | grep -q " $node "; then
        [ -n "$cpus" ] || fail "node $node has no CPUs"
    else
        [ -z "$cpus" ] || fail "node $node, memory-only, has CPUs $cpus"
    fi
    [ "${memory_kib:-0}" -gt 0 ] || fail "node $node has no memory"
done

count=$(echo $expected | wc -w)
numactl --hardware | grep '^available:'
numactl --hardware | grep -q "^available: $count nodes ($online)" || fail "numactl disagrees"

exit $failed
