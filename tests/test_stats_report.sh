#!/bin/sh
# The statistics report at exit reaches the user however the program ends:
#   - `hakmem --stats` with ls, sort and cat, which (GNU coreutils) close
#     stderr before they exit;
#   - a program that closes stderr and opens a file in its place: the report
#     goes to the stderr it started with, never into the program's file;
#   - HAKMEM_STATS_FILE with %p, from a program that forks: one file per
#     process, named by its pid;
#   - HAKMEM_STATS=json: one JSON object per process that python parses,
#     with the fields the README documents.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
wrapper=$builddir/tools/hakmem
if [ ! -f "$lib" ] || [ ! -f "$wrapper" ]; then
    echo "ERROR: build the library and tools/hakmem first (make)"
    exit 99
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/test_stats_report.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
failures=0

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# --stats with programs that close stderr before exiting.
printf 'b\na\n' >"$work/input"
for program in "ls /" "sort $work/input" "cat $work/input"; do
    # shellcheck disable=SC2086
    HAKMEM_LIBRARY=$lib sh "$wrapper" --stats $program >/dev/null 2>"$work/report"
    if grep -q '^hakmem statistics$' "$work/report" && grep -q '^options:$' "$work/report"; then
        echo "ok: hakmem --stats $program prints the report"
    else
        fail "hakmem --stats $program printed no report (stderr: $(head -c 200 "$work/report"))"
    fi
done

# A program that puts a file of its own where stderr was.
if [ -x /usr/bin/python3 ]; then
    HAKMEM_STATS=1 LD_PRELOAD=$lib /usr/bin/python3 -c "
import os
os.close(2)
fd = os.open('$work/own', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
assert fd == 2
os.write(fd, b'own data\n')
" 2>"$work/report"
    if [ "$(cat "$work/own")" = "own data" ] && grep -q '^hakmem statistics$' "$work/report"; then
        echo "ok: a replaced stderr keeps its data; the report goes to the original stderr"
    else
        fail "replaced stderr: file '$(head -c 100 "$work/own")', report $(wc -c <"$work/report") bytes"
    fi
fi

# HAKMEM_STATS_FILE=...%p from a program that forks two children, each of
# which exits normally: three reports, named by the three pids.
if [ -x /usr/bin/python3 ]; then
    mkdir "$work/files"
    pids=$(HAKMEM_STATS_FILE="$work/files/report.%p" LD_PRELOAD=$lib /usr/bin/python3 -c '
import os, sys
children = []
for _ in range(2):
    pid = os.fork()
    if pid == 0:
        sys.exit(0)
    children.append(pid)
for pid in children:
    os.waitpid(pid, 0)
print(os.getpid(), *children)
')
    for pid in $pids; do
        if grep -q '^hakmem statistics$' "$work/files/report.$pid" 2>/dev/null; then
            echo "ok: process $pid wrote its report to report.$pid"
        else
            fail "HAKMEM_STATS_FILE: no report in report.$pid ($(ls "$work/files" | tr '\n' ' '))"
        fi
    done
    count=$(find "$work/files" -name 'report.*' | wc -l)
    [ "$count" -eq 3 ] || fail "HAKMEM_STATS_FILE: $count files, expected 3"
fi

# JSON, into one file shared by several processes: one object per line.
if [ -x /usr/bin/python3 ]; then
    HAKMEM_STATS=json HAKMEM_STATS_FILE="$work/all.json" LD_PRELOAD=$lib \
        sh -c 'ls / >/dev/null; cat /dev/null' 2>"$work/stderr"
    if python3 - "$work/all.json" <<'EOF'; then
import json, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) >= 2, "%d reports" % len(lines)
for line in lines:
    report = json.loads(line)
    for key in ("pid", "classes", "counters", "nodes", "remote_frees", "pages", "topology",
                "process_minor_faults", "process_max_rss_kb", "options"):
        assert key in report, "no %s in %s" % (key, sorted(report))
    assert report["options"]["HAKMEM_STATS"] == "json"
    assert report["topology"].startswith("topology: ")
    assert report["counters"]["mapped_bytes"] > 0
assert len({json.loads(line)["pid"] for line in lines}) == len(lines), "pids repeat"
print("ok: %d JSON reports, one per process, each with every field" % len(lines))
EOF
        :
    else
        fail "HAKMEM_STATS=json: the reports do not parse or lack fields"
    fi
    if [ -s "$work/stderr" ]; then
        fail "with HAKMEM_STATS_FILE, stderr got: $(head -c 200 "$work/stderr")"
    fi
fi

# A file that cannot be written is said so, on stderr: the stderr the
# program started with, not a file it opened in its place.
if [ -x /usr/bin/python3 ]; then
    HAKMEM_STATS_FILE=/nonexistent/dir/report LD_PRELOAD=$lib /usr/bin/python3 -c "
import os
os.close(2)
fd = os.open('$work/own2', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b'own data\\n')
" 2>"$work/stderr"
    if [ "$(cat "$work/own2")" = "own data" ] && grep -q 'cannot write the statistics' "$work/stderr"; then
        echo "ok: the error about HAKMEM_STATS_FILE goes to the original stderr"
    else
        fail "replaced stderr: file '$(head -c 100 "$work/own2")', stderr '$(head -c 100 "$work/stderr")'"
    fi
fi

HAKMEM_STATS_FILE=/nonexistent/dir/report LD_PRELOAD=$lib /bin/true 2>"$work/stderr"
if grep -q 'hakmem: cannot write the statistics to /nonexistent/dir/report' "$work/stderr"; then
    echo "ok: an unwritable HAKMEM_STATS_FILE is reported"
else
    fail "unwritable HAKMEM_STATS_FILE: stderr '$(head -c 200 "$work/stderr")'"
fi

if [ $failures -ne 0 ]; then
    echo "$failures check(s) failed"
    exit 1
fi
echo "all checks passed"
