#!/bin/sh
# Coverage-guided fuzzing of the whole API with libFuzzer: builds hakmem and
# fuzz_api.c with clang (-fsanitize=fuzzer,address,undefined) and fuzzes for
# HAKMEM_FUZZ_SECONDS (60 by default), starting from the committed corpus.
# New inputs go to a scratch folder; a crash input is kept in
# tests/reliability/fuzz-artifacts/ of the build tree.  Skipped where clang or
# its libFuzzer runtime is missing (Debian: clang libclang-rt-14-dev).
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
srcdir=${HAKMEM_SRCDIR:-$builddir}
seconds=${HAKMEM_FUZZ_SECONDS:-60}
cc=${HAKMEM_FUZZ_CC:-clang}
corpus=$srcdir/tests/reliability/corpus
work=$builddir/tests/reliability/libfuzzer
artifacts=$builddir/tests/reliability/fuzz-artifacts
settings=$builddir/tests/reliability/build-settings.sh
names=$builddir/tests/reliability/standard_names.txt
sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"

if ! command -v "$cc" >/dev/null 2>&1; then
    echo "SKIP: $cc is not installed (Debian: apt-get install clang libclang-rt-14-dev)"
    exit 77
fi
for file in "$settings" "$names"; do
    if [ ! -f "$file" ]; then
        echo "ERROR: $file was not generated (make check generates it)"
        exit 99
    fi
done
. "$settings"
mkdir -p "$work" "$artifacts" || exit 99

probe=$work/probe.c
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { return !d + !n; }' \
    >"$probe"
if ! "$cc" -fsanitize=fuzzer $sanitize -o "$work/probe" "$probe" >"$work/probe.log" 2>&1; then
    echo "SKIP: $cc cannot link libFuzzer programs (Debian: apt-get install libclang-rt-14-dev):"
    tail -n 3 "$work/probe.log"
    exit 77
fi

# Built from the top build folder, where the paths in the settings start.
# The standard names are made local, as for the gcc sanitizer build: the
# sanitizer's malloc must serve the process, hakmem only the hak_ names.
cd "$builddir" || exit 99
fuzzer=$work/fuzz_api
target=$srcdir/tests/reliability/fuzz_api.c
rebuild=yes
if [ -x "$fuzzer" ]; then
    rebuild=
    for source in $hakmem_sources "$target" "$settings"; do
        if [ "$source" -nt "$fuzzer" ]; then
            rebuild=yes
        fi
    done
fi
if [ -n "$rebuild" ]; then
    echo "building $fuzzer with $cc"
    rm -f "$work"/*.o
    jobs=$(nproc 2>/dev/null || echo 2)
    # xargs appends one source to the arguments of each compile;
    # $hakmem_cppflags and $hakmem_cflags hold several flags each.
    # shellcheck disable=SC2086
    if ! printf '%s\n' $hakmem_sources | xargs -P "$jobs" -n 1 sh -c '
            object=$1/$(echo "$6" | tr "/." "__").o
            exec "$2" -c -g -O1 -fsanitize=fuzzer-no-link $3 $4 $5 -o "$object" "$6"' \
            compile "$work" "$cc" "$sanitize" "$hakmem_cppflags" "$hakmem_cflags"; then
        echo "ERROR: $cc could not compile hakmem"
        exit 99
    fi
    for object in "$work"/*.o; do
        if nm --defined-only "$object" | grep -qw -f "$names"; then
            objcopy --localize-symbols="$names" "$object" || exit 99
        fi
    done
    # shellcheck disable=SC2086
    if ! "$cc" -g -O1 -fsanitize=fuzzer $sanitize -I"$srcdir/include" -o "$fuzzer" "$target" \
        "$work"/*.o $hakmem_libs; then
        echo "ERROR: $cc could not link the fuzzer"
        exit 99
    fi
fi

scratch=$work/corpus
rm -rf "$scratch"
mkdir -p "$scratch" || exit 99
log=$work/fuzz.log
echo "fuzzing for $seconds s from $(ls "$corpus" | wc -l) corpus files"
"$fuzzer" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$artifacts/" "$scratch" "$corpus" >"$log" 2>&1
status=$?
runs=$(sed -n 's/^Done \([0-9]*\) runs in \([0-9]*\) second.*/\1 executions in \2 s/p' "$log")
coverage=$(grep -o 'cov: [0-9]* ft: [0-9]*' "$log" | tail -n 1)
if [ "$status" -ne 0 ]; then
    echo "FAIL: libFuzzer stopped with status $status; the end of its log:"
    tail -n 40 "$log"
    echo "crash inputs are kept in $artifacts; replay one with"
    echo "  $builddir/tests/reliability/sanitized_fuzz_replay $artifacts/crash-..."
    exit 1
fi
if [ -z "$runs" ]; then
    echo "ERROR: libFuzzer printed no summary; the end of its log:"
    tail -n 20 "$log"
    exit 99
fi
echo "libFuzzer: $runs, $coverage, $(ls "$scratch" | wc -l) new corpus inputs"
exit 0
