#!/bin/sh
# Large blocks replaced in turn keep every page, in small pages, on the
# guest's kernel (Debian's, which refuses moves over several of its mappings
# after it unmapped the destination): large_churn.c.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
echo "kernel $(uname -r)"
HAKMEM_HUGE_PAGES=0 LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/large_churn"
