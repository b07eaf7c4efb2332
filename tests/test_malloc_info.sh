#!/bin/sh
# malloc_info writes well-formed XML in glibc's shape with hakmem's figures:
# <malloc version="1">, one <heap> per NUMA node, and totals that count the
# 3 MiB large block test_glibc_ext --info holds while it prints.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
prog=$builddir/tests/test_glibc_ext

if [ ! -x "$prog" ]; then
    echo "ERROR: $prog does not exist: build the tests first (make check)"
    exit 99
fi
if ! command -v python3 >/dev/null 2>&1; then
    echo "SKIP: python3 is not installed"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test_malloc_info.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

if ! "$prog" --info >"$work/info.xml"; then
    echo "FAIL: malloc_info(0, stdout) did not return 0"
    exit 1
fi
python3 - "$work/info.xml" <<'PY'
import sys
import xml.dom.minidom

try:
    doc = xml.dom.minidom.parse(sys.argv[1])
except Exception as error:
    print("FAIL: malloc_info's output is not well-formed XML:", error)
    print(open(sys.argv[1]).read())
    sys.exit(1)
root = doc.documentElement
failures = []
if root.tagName != "malloc" or root.getAttribute("version") != "1":
    failures.append('the root is not <malloc version="1">')
heaps = root.getElementsByTagName("heap")
if not heaps or [h.getAttribute("nr") for h in heaps] != [str(i) for i in range(len(heaps))]:
    failures.append("no <heap> elements numbered from 0")
totals = {e.getAttribute("type"): e for e in root.childNodes
          if e.nodeType == e.ELEMENT_NODE and e.tagName == "total"}
for kind in ("fast", "rest", "mmap"):
    if kind not in totals:
        failures.append('no process-wide <total type="%s">' % kind)
if "mmap" in totals:
    count = int(totals["mmap"].getAttribute("count"))
    size = int(totals["mmap"].getAttribute("size"))
    if count < 1 or size < 3 << 20:
        failures.append("the 3 MiB block is not in the mmap total (count %d, size %d)"
                        % (count, size))
system = {e.getAttribute("type"): int(e.getAttribute("size")) for e in root.childNodes
          if e.nodeType == e.ELEMENT_NODE and e.tagName == "system"}
if not system.get("current") or system.get("max", 0) < system["current"]:
    failures.append("system current %s, max %s" % (system.get("current"), system.get("max")))
for failure in failures:
    print("FAIL:", failure)
if failures:
    sys.exit(1)
print("ok: malloc_info wrote %d heap(s) of well-formed XML" % len(heaps))
PY
