#!/bin/sh
# Under numactl --membind, every thread's pages are on the bound node,
# whichever node the thread runs on (glibc's malloc).
last_node=$((${NUMA_EXPECTED_NODES:?} - 1))
numactl --membind="$last_node" "$NUMA_BUILDDIR/tests/numa/numa_smoke" --expect-node "$last_node"
