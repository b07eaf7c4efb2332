#!/bin/sh
# Threads on every node allocate blocks from 64 B to 4 MiB with hakmem
# preloaded; all allocations succeed and every page is on an online node.
# (Where the pages should be is for the NUMA placement tests.)
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
output=$(LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_smoke" 2>&1)
status=$?
echo "$output"
if ! echo "$output" | grep -q '^malloc: hakmem$'; then
    echo "FAIL: the preloaded malloc is not hakmem's"
    exit 1
fi
exit $status
