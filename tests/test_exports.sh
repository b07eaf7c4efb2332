#!/bin/sh
# libhakmem.so must export exactly the allocation API: the standard names,
# glibc's __libc_ aliases and malloc extensions, C++'s operators new and
# delete in every form, the hak_ functions that
# include/hakmem.h declares (and, in a NUMA build, the two calls that re-pin
# a thread), nothing else.  Anything
# more is an internal symbol that can clash with the program's own.
set -u

builddir=${HAKMEM_BUILDDIR:-$(pwd)}
srcdir=${HAKMEM_SRCDIR:-${srcdir:-.}}
lib=${HAKMEM_LIB:-$builddir/src/.libs/libhakmem.so}
header=$srcdir/include/hakmem.h

if [ ! -f "$lib" ]; then
    echo "ERROR: $lib does not exist: build the library first (make)"
    exit 99
fi
if [ ! -f "$header" ]; then
    echo "ERROR: $header not found (set HAKMEM_SRCDIR)"
    exit 99
fi
if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: nm (binutils) is not installed"
    exit 77
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/test_exports.XXXXXX") || exit 99
trap 'rm -rf "$work"' EXIT

standard="malloc free cfree free_sized free_aligned_sized calloc realloc reallocarray posix_memalign aligned_alloc memalign valloc
pvalloc malloc_usable_size
__libc_malloc __libc_free __libc_calloc __libc_realloc __libc_memalign __libc_valloc __libc_pvalloc
__libc_mallinfo __libc_mallopt
malloc_trim mallinfo mallinfo2 malloc_stats malloc_info mallopt
_Znwm _Znam _ZnwmRKSt9nothrow_t _ZnamRKSt9nothrow_t _ZnwmSt11align_val_t _ZnamSt11align_val_t
_ZnwmSt11align_val_tRKSt9nothrow_t _ZnamSt11align_val_tRKSt9nothrow_t
_ZdlPv _ZdaPv _ZdlPvm _ZdaPvm _ZdlPvSt11align_val_t _ZdaPvSt11align_val_t
_ZdlPvmSt11align_val_t _ZdaPvmSt11align_val_t _ZdlPvRKSt9nothrow_t _ZdaPvRKSt9nothrow_t
_ZdlPvSt11align_val_tRKSt9nothrow_t _ZdaPvSt11align_val_tRKSt9nothrow_t
setrlimit setrlimit64 prlimit prlimit64"
# A NUMA build also wraps the calls that re-pin a thread (src/affinity.c).
if grep -q '^#define HAKMEM_HAVE_NUMA 1' "$builddir/config.h" 2>/dev/null; then
    standard="$standard sched_setaffinity pthread_setaffinity_np"
fi
for name in $standard; do
    echo "$name"
done >"$work/standard"
# The hak_ twins: every function the public header declares.
grep -o '\<hak_[a-z_]*[[:space:]]*(' "$header" | sed 's/[[:space:]]*($//' >"$work/declared"
if [ ! -s "$work/declared" ]; then
    echo "ERROR: found no hak_ declarations in $header"
    exit 99
fi
sort -u "$work/standard" "$work/declared" >"$work/expected"

# Type A entries are symbol-version definitions, not symbols; a version
# suffix (malloc@@HAKMEM_1.0) is not part of the name.
if ! nm -D --defined-only "$lib" >"$work/nm"; then
    echo "ERROR: nm -D --defined-only $lib failed"
    exit 99
fi
awk '$(NF - 1) != "A" { sub(/@.*/, "", $NF); print $NF }' "$work/nm" | sort -u >"$work/exported"

status=0
extra=$(comm -13 "$work/expected" "$work/exported")
missing=$(comm -23 "$work/expected" "$work/exported")
if [ -n "$extra" ]; then
    echo "FAIL: $lib exports symbols beyond the allocation API:"
    echo "$extra" | sed 's/^/    /'
    status=1
fi
if [ -n "$missing" ]; then
    echo "FAIL: $lib does not export:"
    echo "$missing" | sed 's/^/    /'
    status=1
fi
if [ "$status" -eq 0 ]; then
    echo "ok: $lib exports exactly the $(wc -l <"$work/expected") API functions"
fi
exit $status
