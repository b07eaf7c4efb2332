#!/bin/sh
# Pages move between SuperSlabs and arena chunks on the guest's kernel
# (Debian's, which refuses to move a range over several of its mappings,
# after it unmapped the destination), one mapping at a time:
# - phase_churn.c runs phases of small and of 1-4 KiB blocks in turn, in
#   small pages, and every block keeps its bytes; no move of pages fails;
# - in one shape (the kernel is the same in all), the lending unit test,
#   whose pages go from spans to a SuperSlab, to a span and on to a
#   SuperSlab again, all of them every time, on this kernel's own mremap.
# How much moves in phase_churn is not checked: it hangs on the clock (what
# is stale, what idles), which a guest under emulation keeps loosely.
if [ ! -f "${HAKMEM_LIB:-}" ]; then
    echo "SKIP: hakmem is not built (no ${HAKMEM_LIB:-libhakmem.so})"
    exit 77
fi
echo "kernel $(uname -r)"
node=${NUMA_VM_CPU_NODES%% *}
out=$(numactl --cpunodebind="${node:-0}" env HAKMEM_HUGE_PAGES=0 HAKMEM_DECAY_MS=6400 \
    HAKMEM_STATS=1 LD_PRELOAD="$HAKMEM_LIB" "$NUMA_BUILDDIR/tests/numa/phase_churn" 2>&1)
status=$?
echo "$out" | grep -E '^(phase_churn:|lent_bytes |lend_failures )'
if [ $status -ne 0 ]; then
    echo "FAIL: phase_churn exited with $status"
    exit 1
fi
failures=$(echo "$out" | awk '$1 == "lend_failures" { print $2 }')
if [ "${failures:-missing}" != 0 ]; then
    echo "FAIL: the kernel refused or failed ${failures:-some (no count)} moves of pages"
    exit 1
fi
if [ "${NUMA_VM_SHAPE:-}" != pkg-per-node-2 ]; then
    echo "PASS: phase_churn (the unit test runs in shape pkg-per-node-2)"
    exit 0
fi
# The unit test takes node 0's SuperSlabs and spans.
unit=$(numactl --cpunodebind=0 "$NUMA_BUILDDIR/tests/unit/test_lend" 2>&1)
status=$?
echo "$unit" | grep -E '^(FAIL|test_lend)'
if [ $status -ne 0 ]; then
    echo "FAIL: tests/unit/test_lend exited with $status"
    exit 1
fi
echo "PASS: phase_churn and tests/unit/test_lend"
