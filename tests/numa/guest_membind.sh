#!/bin/sh
# Under numactl --membind, every thread's pages are on the bound node,
# whichever node the thread runs on (glibc's malloc).  The bound node is the
# last one, memory-only where the shape has such nodes.
for node in ${NUMA_VM_NODES:?}; do
    last_node=$node
done
numactl --membind="$last_node" "$NUMA_BUILDDIR/tests/numa/numa_smoke" --expect-node "$last_node"
