#!/bin/sh
# tools/hakmem-compare: a quick run of one benchmark under glibc, hakmem and
# a library that does not exist.  The CSV and JSON must parse and hold both
# real allocators; the missing one must be reported and skipped, not crash
# the run.  Then hakmem at three hardening levels as columns of their own.
set -eu

srcdir=${HAKMEM_SRCDIR:-${srcdir:-.}}
builddir=${HAKMEM_BUILDDIR:-$(pwd)}
tool=$srcdir/tools/hakmem-compare
missing=/nonexistent/libfoo.so

if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi
if [ ! -f "$builddir/src/.libs/libhakmem.so" ] || [ ! -x "$builddir/bench/random_mixed" ]; then
    echo "FAIL: run from the build tree after make (src/.libs/libhakmem.so, bench/random_mixed)"
    exit 1
fi

out=$(mktemp -d "${TMPDIR:-/tmp}/test_compare.XXXXXX")
trap 'rm -rf "$out"' EXIT

export HAKMEM_BUILD_DIR="$builddir"

# run_tool ARGS...: runs hakmem-compare, showing its table; a failure fails
# the test with the tool's stderr.
run_tool()
{
    "$tool" "$@" >"$out/stdout" 2>"$out/stderr"
    status=$?
    if [ "$status" -ne 0 ]; then
        echo "FAIL: hakmem-compare $* exited with status $status"
        cat "$out/stderr"
        exit 1
    fi
    cat "$out/stdout"
}

run_tool --quick --runs 1 --bench random_mixed --alloc "glibc,hakmem,$missing" \
    --out "$out/results"

python3 - "$out" "$missing" "$builddir/src/.libs/libhakmem.so" <<'PYTHON'
import csv
import json
import os
import sys

out, missing, hakmem_library = sys.argv[1:]
results = os.path.join(out, "results")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


with open(os.path.join(results, "results.json")) as source:
    report = json.load(source)
with open(os.path.join(results, "results.csv"), newline="") as source:
    rows = list(csv.DictReader(source))
with open(os.path.join(out, "stderr")) as source:
    stderr = source.read()

for allocator in ("glibc", "hakmem"):
    entries = [e for e in report["results"]
               if e["benchmark"] == "random_mixed" and e["allocator"] == allocator]
    check(len(entries) == 1, "results.json: no random_mixed entry for %s" % allocator)
    if entries:
        entry = entries[0]
        check(len(entry["runs"]) == 1 and not entry["failures"],
              "results.json: %s did not complete its run: %s" % (allocator, entry["failures"]))
        for metric in ("ops_per_s", "minflt", "maxrss_kb"):
            check(entry["summary"].get(metric, {}).get("median", 0) > 0,
                  "results.json: %s has no positive %s" % (allocator, metric))
        cpu = [entry["summary"].get(m, {}).get("median") for m in ("user_s", "sys_s")]
        check(None not in cpu and min(cpu) >= 0 and sum(cpu) > 0,
              "results.json: %s has no CPU seconds (user_s, sys_s): %s" % (allocator, cpu))
    csv_metrics = {r["metric"]: float(r["median"]) for r in rows
                   if r["benchmark"] == "random_mixed" and r["allocator"] == allocator}
    for metric in ("ops_per_s", "minflt", "maxrss_kb"):
        check(csv_metrics.get(metric, 0) > 0, "results.csv: %s has no positive %s"
              % (allocator, metric))

for skipped in report["meta"]["skipped_allocators"]:
    check(skipped["allocator"] == missing,
          "%s was skipped: %s" % (skipped["allocator"], skipped["reason"]))
check(report["meta"]["allocators"].get("hakmem") == hakmem_library,
      "hakmem ran from %s, not the built %s" % (report["meta"]["allocators"].get("hakmem"),
                                                 hakmem_library))
check(report["meta"]["allocators"].get("glibc", "") is None, "glibc must run without preload")
check(len(report["meta"]["allocators"]) == 2,
      "unexpected allocators ran: %s" % sorted(report["meta"]["allocators"]))
check(missing in [s["allocator"] for s in report["meta"]["skipped_allocators"]],
      "results.json does not list %s as skipped" % missing)
check(not any(missing in (r["library"], r["allocator"]) for r in rows),
      "results.csv has a row for the missing allocator")
check("skipping allocator %s" % missing in stderr, "the missing allocator was not reported")
check("run 1/1" in stderr, "no progress line on stderr")
check(os.path.exists(os.path.join(results, "results.md")), "no results.md")
with open(os.path.join(results, "results.md")) as source:
    check("| user s | sys s |" in source.read(), "results.md has no CPU seconds columns")
check(os.path.exists(os.path.join(results, "ops_per_s.png")) or "no charts" in stderr,
      "neither a chart nor a note saying why there is none")

for failure in failures:
    print("FAIL: " + failure)
if failures:
    sys.exit(1)
print("PASS: results hold glibc and hakmem; %s was reported and skipped" % missing)
PYTHON

# One allocator in several configurations, as columns of their own: each
# column's VAR=VALUE settings reach its programs' environment (with valgrind,
# callgrind's counts show the level-2 hakmem doing much more per operation).
# Not where valgrind cannot read the library's debug information (3.19 on
# clang 14's DWARF 5), as it then gives up on every program; any other
# failure under valgrind fails the run below.
instructions=
if command -v valgrind >/dev/null 2>&1; then
    instructions=--instructions
    if ! LD_PRELOAD=$builddir/src/.libs/libhakmem.so valgrind --tool=none \
        --log-file="$out/probe.valgrind" /bin/true >/dev/null 2>&1 &&
        grep -q "debuginfo reader" "$out/probe.valgrind"; then
        echo "note: valgrind cannot read the library's debug information: no instruction counts"
        instructions=
    fi
fi
# shellcheck disable=SC2086
run_tool --quick --runs 1 --bench fixed_size $instructions \
    --alloc "hakmem,h0=hakmem:HAKMEM_HARDEN=0,hakmem:HAKMEM_HARDEN=2,bad=hakmem:2" \
    --out "$out/levels"
python3 - "$out/levels/results.json" "$out/stderr" "$instructions" <<'PYTHON'
import json
import sys

report = json.load(open(sys.argv[1]))
stderr = open(sys.argv[2]).read()
counted = sys.argv[3] == "--instructions"
failures = []
settings = report["meta"]["allocator_settings"]
expected = {"hakmem": [], "h0": ["HAKMEM_HARDEN=0"],
            "hakmem:HAKMEM_HARDEN=2": ["HAKMEM_HARDEN=2"]}
if settings != expected:
    failures.append("allocator settings %s, expected %s" % (settings, expected))
entries = {e["allocator"]: e for e in report["results"] if e["benchmark"] == "fixed_size"}
for name, words in expected.items():
    entry = entries.get(name)
    if entry is None or entry["failures"] or len(entry["runs"]) != 1:
        failures.append("%s did not complete its run" % name)
        continue
    if entry["settings"] != words or not entry["command"].startswith(
            "".join(w + " " for w in words) + "LD_PRELOAD="):
        failures.append("%s ran as %r with settings %s" % (name, entry["command"],
                                                           entry["settings"]))
if "skipping allocator bad=hakmem:2: 2 is not VAR=VALUE" not in stderr:
    failures.append("a setting that is not VAR=VALUE was not reported")
if counted and not failures:
    per_op = {n: entries[n]["summary"]["instr_per_op"]["median"] for n in expected}
    if not per_op["hakmem:HAKMEM_HARDEN=2"] > 2 * per_op["hakmem"]:
        failures.append("HAKMEM_HARDEN=2 did not reach the program: %s instructions per "
                        "operation against %s" % (per_op["hakmem:HAKMEM_HARDEN=2"],
                                                  per_op["hakmem"]))
for failure in failures:
    print("FAIL: " + failure)
if failures:
    sys.exit(1)
print("PASS: the columns ran with their own settings%s" %
      (" (instructions per operation: %s)" % per_op if counted else ""))
PYTHON

# The thread-handoff and C++ benchmarks are in the default set and run.
run_tool --quick --runs 1 --bench larson,xmalloc,cxx_churn --alloc glibc --out "$out/threads"
python3 - "$out/threads/results.json" <<'PYTHON'
import json
import sys

report = json.load(open(sys.argv[1]))
failures = []
for name in ("larson", "xmalloc", "cxx_churn"):
    entries = [e for e in report["results"] if e["benchmark"] == name]
    if len(entries) != 1 or entries[0]["failures"] or len(entries[0]["runs"]) != 1:
        failures.append("%s did not complete its run" % name)
    elif not entries[0]["summary"]["ops_per_s"]["median"] > 0:
        failures.append("%s reported no ops_per_s" % name)
for failure in failures:
    print("FAIL: " + failure)
if failures:
    sys.exit(1)
print("PASS: larson, xmalloc and cxx_churn ran")
PYTHON

# With nothing left to run the tool must say so and fail, not crash.
if "$tool" --quick --runs 1 --bench random_mixed --alloc "$missing" >"$out/stdout" \
        2>"$out/stderr"; then
    echo "FAIL: hakmem-compare succeeded with no allocator to run"
    exit 1
fi
if grep -q Traceback "$out/stderr" || ! grep -q "no allocator left" "$out/stderr"; then
    echo "FAIL: hakmem-compare with only a missing allocator did not explain itself:"
    cat "$out/stderr"
    exit 1
fi
echo "PASS: with only a missing allocator the tool explains and fails"
