#!/bin/sh
# With hakmem preloaded, threads pinned to every node allocate blocks of every
# kind (the eight small classes, Mid, L25, large): at least 99.5% of the pages
# of each kind are on the allocating thread's node.  hakmem finds the nodes
# with hwloc, which it loads at run time: without it, it would stay on one
# node and fail here.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
output=$(LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_smoke" --min-local 99.5 2>&1)
status=$?
echo "$output"
if ! echo "$output" | grep -q '^malloc: hakmem$'; then
    echo "FAIL: the preloaded malloc is not hakmem's"
    exit 1
fi
exit $status
