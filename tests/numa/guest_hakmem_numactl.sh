#!/bin/sh
# hakmem respects numactl: under --membind every page is on the bound node
# (hakmem's own binding must not override it), and under --cpunodebind the
# threads, which then run only on that node, get memory there.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
last_node=$((${NUMA_EXPECTED_NODES:?} - 1))
smoke=$NUMA_BUILDDIR/tests/numa/numa_smoke
failed=0
for binding in --membind --cpunodebind; do
    echo "--- numactl $binding=$last_node"
    numactl "$binding=$last_node" env LD_PRELOAD="$HAKMEM_LIB" "$smoke" \
        --expect-node "$last_node" || failed=1
done
exit $failed
