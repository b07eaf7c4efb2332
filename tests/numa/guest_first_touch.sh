#!/bin/sh
# Under glibc's malloc, with transparent huge pages off, every page of the
# blocks a thread allocates lands on that thread's node: the guest's node
# emulation, thread pinning and numa_smoke's page report all work.  Huge pages
# are off because one can straddle the blocks of two threads (adjacent
# mappings merge) and land wholly on the node of whichever touched it first.
thp=/sys/kernel/mm/transparent_hugepage/enabled
saved=
if [ -w "$thp" ]; then
    saved=$(sed 's/.*\[\(.*\)\].*/\1/' "$thp")
    echo never >"$thp"
fi
"$NUMA_BUILDDIR/tests/numa/numa_smoke" --min-local 100
status=$?
if [ -n "$saved" ]; then
    echo "$saved" >"$thp"
fi
exit $status
