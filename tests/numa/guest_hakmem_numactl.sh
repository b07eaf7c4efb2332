#!/bin/sh
# hakmem respects numactl: under --membind every page is on the bound node
# (hakmem's own binding must not override it), and under --cpunodebind the
# threads, which then run only on that node, get memory there.  The nodes are
# the last one for --membind (memory-only where the shape has such nodes)
# and the last one with CPUs for --cpunodebind.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
for node in ${NUMA_VM_NODES:?}; do
    last_node=$node
done
for node in ${NUMA_VM_CPU_NODES:?}; do
    last_cpu_node=$node
done
smoke=$NUMA_BUILDDIR/tests/numa/numa_smoke
failed=0
for binding in --membind=$last_node --cpunodebind=$last_cpu_node; do
    echo "--- numactl $binding"
    numactl "$binding" env LD_PRELOAD="$HAKMEM_LIB" "$smoke" \
        --expect-node "${binding#*=}" || failed=1
done
exit $failed
