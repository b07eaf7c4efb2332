#!/bin/sh
# Real programs run with hakmem preloaded must produce byte-identical output
# to runs without it: python3 building and dumping a few MB of JSON, sort of
# a ~50 MB file, gcc compiling and linking a C program, and a threaded C++
# program built with this test suite; and a preloaded program's free of
# memory hakmem never handed out must abort with hakmem's message.  A program
# that is not installed is skipped; if none could run, the test is skipped.
set -u

preload_test=test_preload
. "$(dirname "$0")/preload_compare.sh"

# The library must really be mapped into a preloaded process, or every
# comparison below would trivially pass.
real_lib=$(readlink -f "$lib")
if LD_PRELOAD=$lib cat /proc/self/maps | grep -q -F "$real_lib"; then
    echo "ok: $real_lib is mapped into a preloaded process"
else
    fail "$real_lib is not mapped into a process run with LD_PRELOAD=$lib"
fi

# A preloaded program that frees memory hakmem never handed out (here the
# Python interpreter's None, a global) dies of hakmem's message, where the
# programs below, which free only what they allocated, run clean.
if [ -x /usr/bin/python3 ]; then
    LD_PRELOAD=$lib /usr/bin/python3 -I -c '
import ctypes, sys
libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
print("0x%016x" % id(None), flush=True)
libc.free(id(None))
' >"$work/foreign.out" 2>"$work/foreign.err"
    status=$?
    expected="hakmem: free of a pointer hakmem never handed out: $(cat "$work/foreign.out")"
    if [ "$status" -eq 134 ] && grep -qxF "$expected" "$work/foreign.err"; then
        echo "ok: a preloaded python3's free of a global aborts with hakmem's message"
    else
        fail "a preloaded python3's free of a global: status $status (134 expected), stderr:"
        cat "$work/foreign.err"
    fi
fi

if [ -x /usr/bin/python3 ]; then
    cat >"$work/workload.py" <<'EOF'
import json
import sys

table = {}
for i in range(120000):
    table["key%06d" % i] = [i, str(i) * (i % 7), {"mod": i % 13, "half": i / 2}]
for i in range(0, 120000, 3):
    del table["key%06d" % i]
lists = [list(range(i % 200)) for i in range(20000)]
text = "".join("line %d %s\n" % (i, "ab" * (i % 50)) for i in range(60000))
words = sorted(set(text.split()))
dumped = json.dumps(table, sort_keys=True)
summary = {"lists": sum(len(l) for l in lists), "text": len(text), "words": len(words)}
sys.stdout.write(dumped)
sys.stdout.write("\n" + json.dumps(summary) + "\n")
EOF
    compare python3 preloaded /usr/bin/python3 -I "$work/workload.py"
else
    echo "SKIP: /usr/bin/python3 is not installed"
fi

if command -v sort >/dev/null 2>&1 && command -v awk >/dev/null 2>&1; then
    awk 'BEGIN {
        srand(7)
        for (i = 0; i < 2600000; i++)
            printf "%d %s%d\n", int(rand() * 1000000000),
                substr("qwertyuiopasdfghjklzxcvbnm", i % 20 + 1, 6), i % 977
    }' >"$work/numbers.txt"
    echo "sort input: $(wc -c <"$work/numbers.txt") bytes"
    compare sort preloaded sort --parallel=2 "$work/numbers.txt"
else
    echo "SKIP: sort or awk is not installed"
fi

if command -v gcc >/dev/null 2>&1; then
    awk -v count=150 'BEGIN {
        print "#include <stdio.h>"
        print "#include <stdlib.h>"
        print "#include <string.h>"
        for (i = 0; i < count; i++)
            printf "static unsigned long step%d(unsigned long x);\n", i
        for (i = 0; i < count; i++) {
            printf "static unsigned long step%d(unsigned long x)\n{\n", i
            printf "    unsigned long table[16];\n"
            printf "    for (int k = 0; k < 16; k++)\n"
            printf "        table[k] = x * %d + k;\n", 2 * i + 3
            printf "    for (int k = 1; k < 16; k++)\n"
            printf "        table[k] ^= table[k - 1] >> %d;\n", i % 7 + 1
            printf "    return table[15] + (x %% %d ? step%d(x / 2) : %d);\n}\n",
                i + 2, (i + 1) % count, i
        }
    }' >"$work/program.c"
    cat >>"$work/program.c" <<'EOF'
int main(void)
{
    char *buffer = malloc(4096);
    unsigned long sum = 0;

    for (unsigned long x = 1; x < 2000; x++)
        sum += step0(x * 7919);
    snprintf(buffer, 4096, "%lu", sum);
    printf("%s %zu\n", buffer, strlen(buffer));
    free(buffer);
    return 0;
}
EOF
    # Compiles and runs the program, keeping the object file of each run so
    # that they can be compared too.
    cat >"$work/build.sh" <<'EOF'
tag=plain
if [ -n "${LD_PRELOAD:-}" ]; then
    tag=preloaded
fi
gcc -O2 -c -o "$1/program-$tag.o" "$1/program.c" &&
    gcc -o "$1/program-$tag" "$1/program-$tag.o" &&
    "$1/program-$tag"
EOF
    if compare gcc preloaded sh "$work/build.sh" "$work"; then
        if ! cmp "$work/program-plain.o" "$work/program-preloaded.o"; then
            fail "gcc -O2 -c produces a different object file under hakmem"
        fi
    fi
else
    echo "SKIP: gcc is not installed"
fi

cxx_program=$builddir/tests/cxx_map_threads
if [ -x "$cxx_program" ]; then
    compare cxx_map_threads preloaded "$cxx_program"
else
    fail "$cxx_program was not built (make check builds it)"
fi

preload_finish
