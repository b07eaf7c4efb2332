#!/bin/sh
# bench/numa_locality on this machine, under glibc and under hakmem: it runs
# its four scenarios and prints the line tools/hakmem-compare parses, with
# every local share 100% on a machine of one node.  (The NUMA guest runs it
# on several nodes: tools/hakmem-compare --numa.)
program=${HAKMEM_BUILDDIR:-.}/bench/numa_locality
hakmem=${HAKMEM_LIB:-${HAKMEM_BUILDDIR:-.}/src/.libs/libhakmem.so}
if [ ! -x "$program" ]; then
    echo "SKIP: $program is not built"
    exit 77
fi
nodes=$(cat /sys/devices/system/node/online 2>/dev/null)
failed=0
for preload in "" "$hakmem"; do
    label=${preload:+hakmem}
    output=$(LD_PRELOAD=$preload "$program" blocks=500 2>&1)
    status=$?
    echo "--- ${label:-glibc}"
    echo "$output"
    if [ $status -ne 0 ]; then
        echo "FAIL: exit status $status"
        failed=1
        continue
    fi
    line=$(echo "$output" | grep '^numa_locality ')
    for key in ops_per_s minflt maxrss_kb local_pct local_pct_alloc local_pct_remote \
        local_pct_reuse local_pct_migrate local_pct_overall; do
        echo "$line" | grep -qE " $key=[0-9.]+( |\$)" || {
            echo "FAIL: no $key=NUMBER in the result line"
            failed=1
        }
    done
    [ "$(echo "$output" | grep -c '^scenario ')" -eq 4 ] || {
        echo "FAIL: not four scenario lines"
        failed=1
    }
    if [ "$nodes" = 0 ] && ! echo "$line" | grep -q ' local_pct=100.00 '; then
        echo "FAIL: on one node every page is local"
        failed=1
    fi
done
exit $failed
