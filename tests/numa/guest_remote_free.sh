#!/bin/sh
# Blocks a thread on one node allocated and a thread on another freed go back
# to their home node: the freeing thread never gets them, nor any page of the
# home node, and the home thread reuses them (numa_home.c).
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
# Home's Mid classes sit idle while away works, longer than a sixty-fourth of
# the decay in a slow guest: home's next small slabs would give their
# caches back and take the spans' pages (bench/phases' phase change, which
# test_cache_growth and test_lend cover), and home's blocks of those sizes
# would come from other memory.  Here nothing idles that long.
HAKMEM_DECAY_MS=3600000 LD_PRELOAD=$HAKMEM_LIB "$NUMA_BUILDDIR/tests/numa/numa_home" remote-free
