#!/bin/sh
# A thread moved to another node with libnuma's numa_run_on_node, which
# makes the sched_setaffinity system call itself and so bypasses hakmem's
# wrapper, gets memory from the new node from its next malloc on
# (numa_home.c; skipped where the guest has no libnuma.so.1).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" migrate-libnuma
