#!/bin/sh
# Runs every NUMA test (guest_*.sh beside this script) inside one guest boot of
# tools/numa-vm; check-numa.sh boots the guests and counts the results.
#
# A test is a shell script that exits 0 when it passes, 77 when it cannot run
# here, 99 on a hard error and anything else when it fails.  It finds the
# build tree in $NUMA_BUILDDIR, the hakmem library in $HAKMEM_LIB (empty when
# it has not been built), and what the guest should look like where
# tools/numa-vm puts it: the shape in $NUMA_VM_SHAPE, the online nodes in
# $NUMA_VM_NODES and those with CPUs in $NUMA_VM_CPU_NODES.  To add a test,
# add a guest_NAME.sh.

suite_dir=$(dirname "$0")
for test in "$suite_dir"/guest_*.sh; do
    name=${test##*/}
    name=${name%.sh}
    echo "=== $name"
    sh "$test" 2>&1
    status=$?
    case $status in
    0) result=PASS ;;
    77) result=SKIP ;;
    99) result=ERROR ;;
    *) result=FAIL ;;
    esac
    echo ":test-result: $result $name (exit status $status)"
done
