#!/bin/sh
# Replays the committed fuzz corpus, then a few hundred pseudo-random inputs,
# through the fuzz target built with gcc: once on the sanitizer build of
# hakmem, once on the optimised library.  This runs wherever the suite does;
# fuzz_libfuzzer.sh does the coverage-guided fuzzing where clang is
# installed.  HAKMEM_FUZZ_RANDOM sets the number of random inputs.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
srcdir=${HAKMEM_SRCDIR:-$builddir}
corpus=$srcdir/tests/reliability/corpus
random_inputs=${HAKMEM_FUZZ_RANDOM:-300}

if [ ! -d "$corpus" ] || [ -z "$(ls "$corpus")" ]; then
    echo "ERROR: the seed corpus $corpus is missing or empty"
    exit 99
fi

failures=0
for driver in sanitized_fuzz_replay fuzz_replay; do
    program=$builddir/tests/reliability/$driver
    if [ ! -x "$program" ]; then
        echo "ERROR: $program was not built (make check builds it)"
        exit 99
    fi
    echo "$driver: $(ls "$corpus" | wc -l) corpus files, $random_inputs random inputs"
    if ! "$program" "$corpus" --random="$random_inputs" --seed=7; then
        echo "FAIL: $driver found a fault; reproduce a corpus file alone with"
        echo "  $program FILE"
        failures=$((failures + 1))
    fi
done
[ "$failures" -eq 0 ]
