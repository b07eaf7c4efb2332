#!/bin/sh
# Memory hakmem maps before it knows the topology (the first thread's heap,
# before a second thread exists) must not end up on the wrong node: the main
# thread allocates on one node, then a thread on another node allocates and
# gets its own node's memory (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" early
