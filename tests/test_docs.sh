#!/bin/sh
# The documentation says what the code does:
#   - README.md's options table is the one tools/options-doc prints from
#     src/options_table.c (make update-readme rewrites it);
#   - every HAKMEM_* variable the library's sources name is in hakmem(3);
#   - the options of `hakmem --help` and `hakmem-compare --help` are those of
#     the OPTIONS sections of hakmem(1) and hakmem-compare(1), both ways, and
#     the HAKMEM_* variables the two tools read are in their pages;
#   - groff renders each page without a warning (skipped without groff).
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
srcdir=${HAKMEM_SRCDIR:-${srcdir:-.}}
options_doc=$builddir/tools/options-doc
for file in "$options_doc" "$builddir/tools/hakmem" "$builddir/docs/man/hakmem.1" \
    "$builddir/docs/man/hakmem-compare.1" "$builddir/docs/man/hakmem.3"; do
    if [ ! -f "$file" ]; then
        echo "ERROR: $file is missing: build first (make)"
        exit 99
    fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/test_docs.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT
failures=0

fail()
{
    echo "FAIL: $*"
    failures=$((failures + 1))
}

# A page's text as it reads, near enough for grep: no font changes, no
# escaped dashes.
page_text()
{
    sed -e 's/\\f[BIRP]//g' -e 's/\\-/-/g' -e 's/\\(en/-/g' "$1"
}

# The options a page's OPTIONS section defines: the dashed words of the line
# after each .TP, one a line.
page_options()
{
    page_text "$1" | awk '
        /^\.SH / { in_options = ($2 == "OPTIONS") }
        in_options && tag { print }
        { tag = in_options && /^\.TP/ }' |
        tr ' ",' '\n\n\n' | grep -E '^--?[a-z][a-z-]*$' | sort -u
}

# The options a --help text lists: the dashed words at the start of its
# option lines (two spaces, then a dash), before the help that follows
# them.  Only in the section named by $2 when one is given (argparse's).
help_options()
{
    awk -v section="$2" '
        section == "" { on = 1 }
        section != "" && $0 ~ "^(" section "):$" { on = 1; next }
        section != "" && on && /^$/ { exit }
        on && /^  -/ { sub(/^  /, ""); sub(/  .*/, ""); print }' "$1" |
        tr ' ,' '\n\n' | grep -E '^--?[a-z][a-z-]*$' | sort -u
}

# Both ways: $1 the help's options, $2 the page's, $3 and $4 their names.
compare_options()
{
    for option in $(comm -23 "$1" "$2"); do
        fail "$3 lists $option, which $4 does not describe"
    done
    for option in $(comm -13 "$1" "$2"); do
        fail "$4 describes $option, which $3 does not list"
    done
    if [ ! -s "$1" ]; then
        fail "no option found in $3"
    elif cmp -s "$1" "$2"; then
        echo "ok: $4 describes the $(wc -l <"$1") options of $3"
    fi
}

# README's options table.
"$options_doc" markdown >"$work/table" || exit 99
sed -n '/^<!-- options -->$/,/^<!-- \/options -->$/p' "$srcdir/README.md" |
    sed -e '1d' -e '$d' -e '/^$/d' >"$work/readme_table"
if [ ! -s "$work/readme_table" ]; then
    fail "README.md has no options table between <!-- options --> and <!-- /options -->"
elif ! diff -u "$work/table" "$work/readme_table" >"$work/diff"; then
    fail "README.md's options table differs from src/options_table.c (run make update-readme):"
    cat "$work/diff"
else
    echo "ok: README.md's options table is the one of src/options_table.c"
fi

# The library's variables in hakmem(3).
page_text "$builddir/docs/man/hakmem.3" >"$work/hakmem.3.txt"
variables=$(cat "$srcdir"/src/*.c "$srcdir"/src/*/*.c |
    grep -o '"HAKMEM_[A-Z0-9_]*"' | tr -d '"' | sort -u)
if [ -z "$variables" ]; then
    fail "no HAKMEM_* variable found in $srcdir/src"
fi
missing=0
for variable in $variables; do
    if ! grep -q "^$variable=" "$work/hakmem.3.txt"; then
        fail "hakmem(3) does not describe $variable"
        missing=$((missing + 1))
    fi
done
if [ -n "$variables" ] && [ "$missing" -eq 0 ]; then
    echo "ok: hakmem(3) describes the $(echo "$variables" | wc -l) variables of src/"
fi

# hakmem(1) against the wrapper's --help.
if sh "$builddir/tools/hakmem" --help >"$work/hakmem.help" 2>&1; then
    help_options "$work/hakmem.help" "" >"$work/help_options"
    page_options "$builddir/docs/man/hakmem.1" >"$work/page_options"
    compare_options "$work/help_options" "$work/page_options" "hakmem --help" "hakmem(1)"
else
    fail "hakmem --help failed: $(head -c 200 "$work/hakmem.help")"
fi
for variable in $(grep -o 'HAKMEM_[A-Z0-9_]*' "$srcdir/tools/hakmem.in" | sort -u); do
    page_text "$builddir/docs/man/hakmem.1" | grep -q "$variable" ||
        fail "hakmem(1) does not mention $variable, which tools/hakmem.in uses"
done

# hakmem-compare(1) against its --help, and the variables it reads.
if ! command -v python3 >/dev/null 2>&1; then
    echo "skipped: hakmem-compare --help (no python3)"
elif python3 "$srcdir/tools/hakmem-compare" --help >"$work/compare.help" 2>&1; then
    # Python before 3.10 calls the section "optional arguments".
    help_options "$work/compare.help" "options|optional arguments" >"$work/help_options"
    page_options "$builddir/docs/man/hakmem-compare.1" >"$work/page_options"
    compare_options "$work/help_options" "$work/page_options" "hakmem-compare --help" \
        "hakmem-compare(1)"
else
    fail "hakmem-compare --help failed: $(head -c 200 "$work/compare.help")"
fi
# The variables it reads by name: HAKMEM_COMPARE_REEXECED, read through a
# constant, only marks the tool's own re-execution and is no setting.
for variable in $(grep -o 'os.environ.get("HAKMEM_[A-Z0-9_]*")' "$srcdir/tools/hakmem-compare" |
    grep -o 'HAKMEM_[A-Z0-9_]*' | sort -u); do
    page_text "$builddir/docs/man/hakmem-compare.1" | grep -q "$variable" ||
        fail "hakmem-compare(1) does not mention $variable, which tools/hakmem-compare reads"
done

# Rendering.
if ! command -v groff >/dev/null 2>&1; then
    echo "skipped: rendering (groff is not installed; Debian: apt-get install groff-base)"
else
    for page in hakmem.1 hakmem-compare.1 hakmem.3; do
        groff -man -Tutf8 -ww -z "$builddir/docs/man/$page" >"$work/warnings" 2>&1
        if [ -s "$work/warnings" ]; then
            fail "groff warns about $page:"
            cat "$work/warnings"
        else
            echo "ok: groff renders $page without a warning"
        fi
    done
fi

if [ "$failures" -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
exit 0
