#!/bin/sh
# The pages one phase of a program freed move to the next phase's slabs and
# spans, both ways, round after round, on the guest's kernel (Debian's,
# which refuses to move a range over several of its mappings, after it
# unmapped the destination): phase_churn.c, on one node's CPUs, in small
# pages, every freed span and spare SuperSlab stale after 100 ms, as the
# pause between two phases has them.  No move may fail, and more than
# three phases' worth must move (five could): lending one way only, as
# hakmem did on such kernels before c2cad5a, moved about one.
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
lent=$(echo "$out" | awk '$1 == "lent_bytes" { print $2 }')
failures=$(echo "$out" | awk '$1 == "lend_failures" { print $2 }')
if [ -z "$lent" ] || [ -z "$failures" ]; then
    echo "FAIL: no lent_bytes or lend_failures in hakmem's statistics"
    exit 1
fi
if [ "$failures" -ne 0 ]; then
    echo "FAIL: the kernel refused or failed $failures moves of pages"
    exit 1
fi
phase_bytes=$((16 * 1024 * 1024))
if [ "$lent" -le $((3 * phase_bytes)) ]; then
    echo "FAIL: $lent bytes moved between phases, not more than three phases' ($((3 * phase_bytes)))"
    exit 1
fi
echo "PASS: $lent bytes moved between phases, no move failed"
