#!/bin/sh
# Blocks a thread on one node allocated and a thread on another freed go back
# to their home node: the freeing thread never gets them, nor any page of the
# home node, and the home thread reuses them (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" remote-free
