#!/bin/sh
# hak_malloc_onnode places a block on the node asked for, whichever node the
# caller runs on, hak_node_of reports that node, and a thread on any node may
# free the block (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" onnode
