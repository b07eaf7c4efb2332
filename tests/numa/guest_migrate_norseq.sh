#!/bin/sh
# Without rseq (glibc.pthread.rseq=0), malloc cannot see a move by itself; a
# thread that moves itself with sched_setaffinity still gets memory from the
# new node from its next malloc on, through hakmem's wrapper (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
GLIBC_TUNABLES=glibc.pthread.rseq=0 LD_PRELOAD=$HAKMEM_LIB \
    "$NUMA_BUILDDIR/tests/numa/numa_home" migrate
