#!/bin/sh
# The bench programs print the one line hakmem-compare reads, count the
# operations they claim, accept key=value and positional arguments, reject
# bad ones, and write the blocks they allocate; bench/rusage_run reports
# exit status, signals and rusage, and preloads only into its command.
set -eu

bench=${HAKMEM_BUILDDIR:-$(pwd)}/bench
failures=0
out=$(mktemp -d "${TMPDIR:-/tmp}/test_bench_programs.XXXXXX")
trap 'rm -rf "$out"' EXIT

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# field NAME LINE: the value of NAME=... in LINE.
field()
{
    printf '%s\n' "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

# check_line PROGRAM EXPECTED_OPS ARGS...: runs the program, checks the
# format of its single output line and its ops count; leaves it in $line.
check_line()
{
    program=$1
    expected_ops=$2
    shift 2
    if ! timeout 120 "$bench/$program" "$@" >"$out/stdout" 2>"$out/stderr"; then
        fail "$program $*: exited with status $?: $(cat "$out/stderr")"
        line=
        return
    fi
    line=$(cat "$out/stdout")
    if [ "$(wc -l <"$out/stdout")" -ne 1 ]; then
        fail "$program $*: printed $(wc -l <"$out/stdout") lines, not one"
    fi
    number='[0-9][0-9.]*'
    if ! printf '%s\n' "$line" | grep -Eq "^$program ops_per_s=$number ops=$number \
seconds=$number minflt=$number maxrss_kb=$number( [a-z_]+=-?$number)*\$"; then
        fail "$program $*: malformed line: $line"
    fi
    if [ "$(field ops "$line")" != "$expected_ops" ]; then
        fail "$program $*: ops=$(field ops "$line"), expected $expected_ops"
    fi
}

check_line random_mixed 20000 cycles=20000 ws=64
check_line random_mixed 1000 1000 50 7
if [ "$(field ws "$line")" != 50 ] || [ "$(field seed "$line")" != 7 ]; then
    fail "random_mixed: positional arguments not taken in order: $line"
fi
check_line fixed_size 5000 size=100 n=5000
[ "$(field size "$line")" = 100 ] || fail "fixed_size: size not taken: $line"
# Four batch sizes times four block sizes, each pairing 1600 * rounds pairs.
check_line batch_free 51200 rounds=2
check_line xthread 30 rounds=3 batch=10
# Several pairs count the blocks of all of them; min=max fixes the size.
check_line xthread 120 rounds=3 batch=10 pairs=4 min=64 max=64
[ "$(field pairs "$line")" = 4 ] && [ "$(field min "$line")" = 64 ] ||
    fail "xthread: pairs or min not taken: $line"
# A deep ring filled and emptied whole in turn, its rounds not a multiple of
# the depth: it ends (a wait that never does is cut off, and fails).
check_line xthread 140 rounds=7 batch=10 pairs=2 depth=3 swing=1
[ "$(field depth "$line")" = 3 ] && [ "$(field swing "$line")" = 1 ] ||
    fail "xthread: depth or swing not taken: $line"
# Generations of threads: ops = threads * generations * rounds * slots.
check_line larson 600 threads=3 generations=4 rounds=5 slots=10
# Every record created counts: rounds * (records + records / 3) per thread.
check_line cxx_churn 480 rounds=3 records=120 threads=1
check_line cxx_churn 960 rounds=3 records=120 threads=2
# Bytes written: threads * iterations * writes * size, with or without the
# blocks the main thread hands over.
check_line cache_scratch 240 threads=2 iterations=3 size=8 writes=5
check_line cache_scratch 240 threads=2 iterations=3 size=8 writes=5 passive=0
[ "$(field passive "$line")" = 0 ] || fail "cache_scratch: passive not taken: $line"
# Per round: 2 ops a node of 1 MiB / 136 B, 12.5 a slot of 1 MiB / 2 KiB.
check_line phases 43640 rounds=2 mib=1 pause_ms=0
[ "$(field pause_ms "$line")" = 0 ] || fail "phases: pause_ms not taken: $line"
# With big_every=8 a slot averages (7 * 2 KiB + 120 KiB) / 8, 16.75 KiB:
# 60 slots of 1 MiB, 12.5 ops each.
check_line phases 32340 rounds=2 mib=1 pause_ms=0 big_every=8
[ "$(field big_every "$line")" = 8 ] || fail "phases: big_every not taken: $line"
check_line mid_large_mt 200 threads=2 cycles=100 ws=16
check_line mid_large_mt 200 threads=2 cycles=100 ws=16 touch=64
[ "$(field touch "$line")" = 64 ] || fail "mid_large_mt: touch not taken: $line"
check_line realloc_grow 26 rounds=2 max_kb=8192
check_line realloc_grow 154 rounds=2 max_kb=8192 step=8
[ "$(field step "$line")" = 8 ] || fail "realloc_grow: step not taken: $line"
check_line fork_churn 20 forks=20 threads=1
check_line realloc_inplace 1000 cycles=1000 ws=64
[ "$(field ws "$line")" = 64 ] || fail "realloc_inplace: ws not taken: $line"

# Four live buffers of 2-3 MiB, every page written: well over 8 MiB resident.
check_line large_blocks 5 steps=5 live=4 min_mb=2 max_mb=3
if [ -n "$line" ] && [ "$(field maxrss_kb "$line")" -lt 8192 ]; then
    fail "large_blocks: peak RSS $(field maxrss_kb "$line") KiB; the buffers are not being written"
fi
if "$bench/large_blocks" min_mb=4 max_mb=3 >/dev/null 2>&1; then
    fail "large_blocks: accepted max_mb below min_mb"
fi

# ops = live + steps; a byte in every page of 64 tables of 256 KiB: well
# over 8 MiB resident.
check_line calloc_tables 68 steps=4 live=64 min_kb=256 max_kb=256 stride_kb=4
if [ -n "$line" ] && [ "$(field maxrss_kb "$line")" -lt 8192 ]; then
    fail "calloc_tables: peak RSS $(field maxrss_kb "$line") KiB; the tables are not being written"
fi
if "$bench/calloc_tables" min_kb=512 max_kb=256 >/dev/null 2>&1; then
    fail "calloc_tables: accepted max_kb below min_kb"
fi

# ops = cycles; page-aligned blocks of 8-16 KiB in 64 slots, of which about
# half are live, a byte written in each: the program checks each block's
# alignment and exits on a misaligned one.
check_line aligned 2000 cycles=2000 ws=64 align=4096 min=8192 max=16384
# Refused with status 2 before any allocation: posix_memalign's EINVAL or a
# division by a span of 0 would end it otherwise.
for bad in "align=12" "align=4" "min=100 max=99" "min=0"; do
    # shellcheck disable=SC2086 # the words of $bad are separate arguments
    if "$bench/aligned" cycles=10 $bad >/dev/null 2>&1; then
        fail "aligned $bad: accepted"
    elif [ $? -ne 2 ]; then
        fail "aligned $bad: exit status is not 2"
    fi
done

# ops = rounds * batch pairs.
check_line mid_batch 30 rounds=3 batch=10
if "$bench/mid_batch" min=100 max=99 >/dev/null 2>&1; then
    fail "mid_batch: accepted max below min"
elif [ $? -ne 2 ]; then
    fail "mid_batch min=100 max=99: exit status is not 2"
fi

# Every page of every block is written, so a thread holding about half of 64
# blocks averaging 544 KiB must have well over 8 MiB resident at its peak.
check_line l25 400 threads=1 cycles=400 ws=64
if [ -n "$line" ] && [ "$(field maxrss_kb "$line")" -lt 8192 ]; then
    fail "l25: peak RSS $(field maxrss_kb "$line") KiB; the blocks are not being written"
fi

for bad in "xthread min=100 max=99" "larson min=100 max=99" "larson slots=0" \
    "cxx_churn records=2" "cache_scratch threads=65"; do
    # shellcheck disable=SC2086 # the words of $bad are the program and its arguments
    if "$bench/"$bad >/dev/null 2>&1; then
        fail "$bad: accepted"
    fi
done

for bad in "ws=0" "cycles=abc" "colour=3" "1 2 3 4"; do
    # shellcheck disable=SC2086 # the words of $bad are separate arguments
    if "$bench/random_mixed" $bad >/dev/null 2>"$out/stderr"; then
        fail "random_mixed $bad: accepted"
    elif [ $? -ne 2 ]; then
        fail "random_mixed $bad: exit status is not 2"
    fi
done
# A seed of 0 modulo 2^32 would leave xorshift at 0: every program that
# takes one refuses it (bench_seed).
for program in random_mixed aligned mid_batch xthread cxx_churn calloc_tables large_blocks; do
    if "$bench/$program" seed=4294967296 >/dev/null 2>"$out/stderr"; then
        fail "$program seed=4294967296: accepted"
    elif ! grep -q "seed must not be 0" "$out/stderr"; then
        fail "$program seed=4294967296: refused for another reason: $(cat "$out/stderr")"
    fi
done

# rusage_run mirrors the exit status and writes its report.
status=0
"$bench/rusage_run" "$out/report" sh -c 'exit 3' || status=$?
[ "$status" -eq 3 ] || fail "rusage_run: exit status $status, expected 3"
report_format='^exit=3 signal=0 core=0 wall_s=[0-9.]+ user_s=[0-9.]+ sys_s=[0-9.]+ '
report_format=$report_format'minflt=[0-9]+ majflt=[0-9]+ maxrss_kb=[0-9]+$'
grep -Eq "$report_format" "$out/report" || fail "rusage_run: bad report for exit 3: $(cat "$out/report")"

status=0
"$bench/rusage_run" "$out/report" sh -c 'kill -KILL $$' || status=$?
[ "$status" -eq 137 ] || fail "rusage_run: exit status $status for SIGKILL, expected 137"
grep -q '^exit=-1 signal=9 ' "$out/report" ||
    fail "rusage_run: SIGKILL not reported: $(cat "$out/report")"

# -p preloads into the command only; without it LD_PRELOAD is cleared.
# shellcheck disable=SC2016 # $LD_PRELOAD is for the inner shell to expand
LD_PRELOAD='' "$bench/rusage_run" -p /no/such/lib.so "$out/report" sh -c 'echo "$LD_PRELOAD"' \
    >"$out/stdout" 2>/dev/null
[ "$(cat "$out/stdout")" = /no/such/lib.so ] || fail "rusage_run -p: LD_PRELOAD not set"
# shellcheck disable=SC2016
LD_PRELOAD=/no/such/lib.so "$bench/rusage_run" "$out/report" sh -c 'echo "x$LD_PRELOAD"' \
    >"$out/stdout" 2>/dev/null
[ "$(cat "$out/stdout")" = x ] || fail "rusage_run: LD_PRELOAD not cleared without -p"

# Peak RSS is the command's own, not inherited from a large parent: a
# 200 MiB process that starts rusage_run must not show up in the report.
if command -v python3 >/dev/null 2>&1; then
    python3 -c '
import subprocess, sys
ballast = bytearray(200 * 1024 * 1024)
subprocess.run(sys.argv[1:], check=True)
' "$bench/rusage_run" "$out/report" "$bench/random_mixed" cycles=1000 >"$out/stdout"
    rss=$(field maxrss_kb "$(cat "$out/stdout")")
    [ "$rss" -lt 102400 ] || fail "random_mixed under rusage_run reports ${rss} KiB peak RSS"
fi

if [ "$failures" -ne 0 ]; then
    exit 1
fi
echo "PASS: bench programs and rusage_run"
