#!/bin/sh
# A thread moved to another node with the sched_setaffinity system call
# itself (as libnuma's numa_run_on_node makes it), which hakmem does not see,
# gets memory from the new node from its next malloc on (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" migrate-syscall
