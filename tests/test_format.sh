#!/bin/sh
# The C sources follow .clang-format: clang-format would change nothing in
# any of them.  The style is that of clang-format 14 (Debian 12's, which
# tools/quickstart installs); other versions format some constructs
# differently, so the test is skipped with them, without clang-format, and
# where the tree is not a git checkout (a release tarball has no file list).
set -u

srcdir=${HAKMEM_SRCDIR:-${srcdir:-.}}
if ! command -v clang-format >/dev/null 2>&1; then
    echo "SKIP: clang-format is not installed (Debian: apt-get install clang-format)"
    exit 77
fi
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
if [ "$version" != 14 ]; then
    echo "SKIP: clang-format ${version:-of unknown version} is not version 14, whose style .clang-format pins"
    exit 77
fi
# make distcheck unpacks the tarball inside the checkout: a tree in a git
# checkout that is not its top is no checkout of its own.
top=$(git -C "$srcdir" rev-parse --show-toplevel 2>/dev/null)
if [ -z "$top" ] || [ "$(cd "$top" && pwd -P)" != "$(cd "$srcdir" && pwd -P)" ]; then
    echo "SKIP: $srcdir is not a git checkout"
    exit 77
fi

files=$(git -C "$srcdir" ls-files '*.c' '*.h' '*.cc')
if [ -z "$files" ]; then
    echo "ERROR: no C sources found in $srcdir"
    exit 99
fi
cd "$srcdir" || exit 99
# shellcheck disable=SC2086
if ! clang-format --dry-run --Werror $files 2>"${TMPDIR:-/tmp}/test_format.$$"; then
    echo "FAIL: these files do not follow .clang-format (run clang-format -i on them):"
    grep -o '^[^:]*:[0-9]*:[0-9]*: error' "${TMPDIR:-/tmp}/test_format.$$" | cut -d: -f1 |
        sort | uniq -c
    rm -f "${TMPDIR:-/tmp}/test_format.$$"
    exit 1
fi
rm -f "${TMPDIR:-/tmp}/test_format.$$"
echo "ok: $(echo "$files" | wc -l) files follow .clang-format"
exit 0
