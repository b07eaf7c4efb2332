/* glibc's malloc extensions answered by hakmem: mallinfo2 counts the bytes a
 * program holds (within 10% of what it asked for, 200 MiB in mixed sizes)
 * and drops as it frees; mallinfo gives mallinfo2's figures, saturated at
 * INT_MAX; mallopt
 * takes M_TRIM_THRESHOLD as the HotSpanBox budget and returns what
 * README.md says; malloc_stats prints hakmem's report; malloc_info refuses
 * options other than 0; the __libc_ names and cfree (as an old binary
 * binds it) are hakmem's.  With --info, prints malloc_info's XML for
 * test_malloc_info.sh instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hakmem.h"
#include "harness.h"

extern void *__libc_malloc(size_t size);
extern void __libc_free(void *ptr);
extern void *__libc_calloc(size_t nmemb, size_t size);
extern void *__libc_realloc(void *ptr, size_t size);
extern void *__libc_memalign(size_t alignment, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);
extern struct mallinfo __libc_mallinfo(void);
extern int __libc_mallopt(int param, int value);

/* cfree as binaries built before glibc 2.26 reference it: under the version
 * glibc gave its first symbols on the architecture. */
#if defined(__GLIBC__) && defined(__x86_64__)
#define OLD_CFREE "cfree@GLIBC_2.2.5"
#elif defined(__GLIBC__) && defined(__aarch64__)
#define OLD_CFREE "cfree@GLIBC_2.17"
#elif defined(__GLIBC__) && defined(__i386__)
#define OLD_CFREE "cfree@GLIBC_2.0"
#endif
#ifdef OLD_CFREE
__asm__(".symver old_cfree, " OLD_CFREE);
extern void old_cfree(void *ptr);
#endif

#define HELD (200 * MiB)
#define MAX_BLOCKS 100000

/* By count, as programs allocate: mostly small blocks, most bytes in big
 * ones. */
static const struct size_tier tiers[] = {
    {600, 16, 1024},
    {300, 1025, 32 * 1024},
    {90, 32 * 1024 + 1, 1024 * 1024},
    {10, 1024 * 1024 + 1, 4 * 1024 * 1024},
};

static double relative(size_t measured, size_t expected)
{
    return ((double)measured - (double)expected) / (double)expected;
}

static void test_mallinfo2(void)
{
    void **blocks = calloc(MAX_BLOCKS, sizeof(void *));
    size_t *sizes = calloc(MAX_BLOCKS, sizeof(size_t));
    if (!blocks || !sizes)
        hard_error("calloc of the block tables failed");
    struct mallinfo2 before = mallinfo2();
    uint64_t rng = 7;
    size_t count = 0, requested = 0, usable = 0, large = 0, large_bytes = 0;
    while (requested < HELD) {
        if (count == MAX_BLOCKS)
            hard_error("more than %d blocks", MAX_BLOCKS);
        size_t size = TIERED_SIZE(&rng, tiers);
        blocks[count] = malloc(size);
        if (!blocks[count])
            hard_error("malloc(%zu) failed", size);
        memset(blocks[count], 1, size);
        sizes[count] = malloc_usable_size(blocks[count]);
        requested += size;
        usable += sizes[count];
        if (size > MiB) {
            large++;
            large_bytes += sizes[count];
        }
        count++;
    }
    struct mallinfo2 full = mallinfo2();
    size_t in_use = full.uordblks - before.uordblks;
    printf("%zu blocks, %.1f MiB asked for, %.1f MiB usable: uordblks grew by %.1f MiB "
           "(%+.2f%% of the bytes asked for), arena %.1f MiB, hblks %zu, hblkhd %.1f MiB\n",
           count, (double)requested / MiB, (double)usable / MiB, (double)in_use / MiB,
           100 * relative(in_use, requested), (double)full.arena / MiB, full.hblks,
           (double)full.hblkhd / MiB);
    CHECK(in_use >= requested && relative(in_use, requested) <= 0.10,
          "uordblks grew by %zu bytes for %zu bytes asked for (want within 10%% above)", in_use,
          requested);
    CHECK(in_use <= usable + MiB && in_use + MiB >= usable,
          "uordblks grew by %zu bytes, but the blocks' usable sizes add up to %zu", in_use, usable);
    CHECK(full.hblks >= before.hblks + large, "hblks %zu: not counting %zu large blocks",
          full.hblks, large);
    CHECK(full.hblkhd >= before.hblkhd + large_bytes && full.hblkhd <= full.uordblks,
          "hblkhd %zu: not %zu bytes of large blocks, within uordblks %zu", full.hblkhd,
          large_bytes, full.uordblks);
    CHECK(full.arena >= full.uordblks + full.fordblks - full.fsmblks,
          "arena %zu is less than the bytes in use %zu and retained", full.arena, full.uordblks);

    /* Every other block goes: uordblks falls by what they held. */
    size_t freed = 0;
    for (size_t i = 0; i < count; i += 2) {
        freed += sizes[i];
        free(blocks[i]);
    }
    struct mallinfo2 half = mallinfo2();
    size_t fall = full.uordblks - half.uordblks;
    printf("freed %.1f MiB: uordblks fell by %.1f MiB, fordblks %.1f MiB, keepcost %.1f MiB\n",
           (double)freed / MiB, (double)fall / MiB, (double)half.fordblks / MiB,
           (double)half.keepcost / MiB);
    CHECK(half.uordblks < full.uordblks && fall + MiB >= freed && fall <= freed + MiB,
          "freeing %zu bytes took uordblks from %zu to %zu", freed, full.uordblks, half.uordblks);
    CHECK(half.fordblks >= half.fsmblks + half.keepcost && half.fordblks > 0,
          "fordblks %zu is not the cached %zu plus the retained %zu bytes", half.fordblks,
          half.fsmblks, half.keepcost);
    for (size_t i = 1; i < count; i += 2)
        free(blocks[i]);
    struct mallinfo2 after = mallinfo2();
    CHECK(after.uordblks <= before.uordblks + MiB,
          "after every block is freed uordblks is %zu, it was %zu before", after.uordblks,
          before.uordblks);
    CHECK(after.hblks == before.hblks, "hblks %zu after freeing, %zu before", after.hblks,
          before.hblks);

    struct mallinfo2 wide = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo narrow = mallinfo();
#pragma GCC diagnostic pop
    CHECK((size_t)narrow.arena == (wide.arena > INT_MAX ? INT_MAX : wide.arena) &&
              (size_t)narrow.uordblks == (wide.uordblks > INT_MAX ? INT_MAX : wide.uordblks) &&
              (size_t)narrow.hblkhd == wide.hblkhd,
          "mallinfo (arena %d, uordblks %d) differs from mallinfo2 (%zu, %zu)", narrow.arena,
          narrow.uordblks, wide.arena, wide.uordblks);
    free(blocks);
    free(sizes);
}

/* A block of 3 GiB, never touched, takes the int fields past INT_MAX. */
static void test_mallinfo_saturates(void)
{
    void *big = malloc(opaque_size((size_t)3 << 30));
    if (!big) {
        printf("no 3 GiB block (ulimit -v, or less memory and swap than that): saturation not "
               "tested\n");
        return;
    }
    struct mallinfo2 wide = mallinfo2();
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    struct mallinfo narrow = mallinfo();
#pragma GCC diagnostic pop
    CHECK(wide.uordblks > INT_MAX && wide.hblkhd > INT_MAX,
          "holding 3 GiB, mallinfo2 says uordblks %zu, hblkhd %zu", wide.uordblks, wide.hblkhd);
    CHECK(narrow.uordblks == INT_MAX && narrow.hblkhd == INT_MAX && narrow.arena == INT_MAX &&
              narrow.hblks == (int)wide.hblks,
          "holding 3 GiB, mallinfo says uordblks %d, hblkhd %d, arena %d, hblks %d",
          narrow.uordblks, narrow.hblkhd, narrow.arena, narrow.hblks);
    free(big);
}

/* Frees 32 L25 blocks, more than the thread's ring keeps, and returns the
 * bytes the backends then keep resident. */
static size_t keepcost_after_frees(void)
{
    void *blocks[32];
    for (int i = 0; i < 32; i++) {
        blocks[i] = malloc(opaque_size(200 * KiB));
        if (!blocks[i])
            hard_error("malloc failed");
        memset(blocks[i], 1, 200 * KiB);
    }
    for (int i = 0; i < 32; i++)
        free(blocks[i]);
    return mallinfo2().keepcost;
}

static void test_mallopt(void)
{
    CHECK(mallopt(M_TRIM_THRESHOLD, 0) == 1, "mallopt(M_TRIM_THRESHOLD, 0) refused");
    malloc_trim(0);
    size_t kept_none = keepcost_after_frees();
    CHECK(mallopt(M_TRIM_THRESHOLD, 64 << 20) == 1, "mallopt(M_TRIM_THRESHOLD, 64 MiB) refused");
    size_t kept_some = keepcost_after_frees();
    printf("freed 6.4 MiB: %zu bytes kept at M_TRIM_THRESHOLD 0, %zu at 64 MiB\n", kept_none,
           kept_some);
    CHECK(kept_none == 0, "at M_TRIM_THRESHOLD 0 hakmem kept %zu freed bytes", kept_none);
    CHECK(kept_some >= 4 * MiB, "at M_TRIM_THRESHOLD 64 MiB hakmem kept only %zu freed bytes",
          kept_some);
    CHECK(mallopt(M_TRIM_THRESHOLD, 32 << 20) == 1, "mallopt(M_TRIM_THRESHOLD, 32 MiB) refused");
    /* glibc's idiom for "never trim": taken, as an unbounded budget. */
    CHECK(mallopt(M_TRIM_THRESHOLD, -1) == 1, "mallopt(M_TRIM_THRESHOLD, -1) refused");
    size_t kept_all = keepcost_after_frees();
    CHECK(kept_all >= 4 * MiB, "at M_TRIM_THRESHOLD -1 hakmem kept only %zu freed bytes", kept_all);
    CHECK(mallopt(M_TRIM_THRESHOLD, 32 << 20) == 1, "mallopt(M_TRIM_THRESHOLD, 32 MiB) refused");

    static const int ignored[] = {M_TOP_PAD, M_MMAP_THRESHOLD, M_MMAP_MAX, M_CHECK_ACTION,
                                  M_PERTURB, M_ARENA_TEST,     M_ARENA_MAX};
    for (size_t i = 0; i < sizeof(ignored) / sizeof(ignored[0]); i++)
        CHECK(mallopt(ignored[i], 1) == 1, "mallopt(%d, 1) refused", ignored[i]);
    CHECK(mallopt(M_MXFAST, 64) == 1, "mallopt(M_MXFAST, 64) refused");
    CHECK(mallopt(M_MXFAST, 1000) == 0, "mallopt(M_MXFAST, 1000) accepted (glibc refuses)");
    CHECK(mallopt(12345, 1) == 0, "mallopt of an unknown parameter accepted");
}

static void test_malloc_stats(void)
{
    char path[] = "/tmp/test_glibc_ext.XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        hard_error("mkstemp failed");
    unlink(path);
    int saved = dup(2);
    dup2(fd, 2);
    malloc_stats();
    dup2(saved, 2);
    close(saved);
    char text[64] = {0};
    ssize_t got = pread(fd, text, sizeof(text) - 1, 0);
    close(fd);
    CHECK(got > 0 && strstr(text, "hakmem statistics"),
          "malloc_stats did not print hakmem's report on stderr (got \"%s\")", text);
}

/* The XML itself is test_malloc_info.sh's to check. */
static void test_malloc_info_options(void)
{
    errno = 0;
    int status = malloc_info(1, stdout);
    CHECK(status == -1 && errno == EINVAL, "malloc_info(1, ...) returned %d, errno %d", status,
          errno);
}

static void test_libc_names(void)
{
    char *block = __libc_malloc(opaque_size(100));
    CHECK(block && hak_node_of(block) >= 0, "__libc_malloc's block %p is not hakmem's",
          (void *)block);
    block = __libc_realloc(block, opaque_size(5000));
    CHECK(block && hak_node_of(block) >= 0 && malloc_usable_size(block) >= 5000,
          "__libc_realloc's block %p is not hakmem's", (void *)block);
    __libc_free(block);
    char *zeroed = __libc_calloc(10, opaque_size(100));
    CHECK(zeroed && hak_node_of(zeroed) >= 0 && nonzero_offset(zeroed, 1000) == PATTERN_INTACT,
          "__libc_calloc's block is not hakmem's or not zero");
    free(zeroed);
    void *aligned[] = {__libc_memalign(256, opaque_size(100)), __libc_valloc(opaque_size(100)),
                       __libc_pvalloc(opaque_size(100))};
    size_t align[] = {256, 4096, 4096};
    for (int i = 0; i < 3; i++) {
        CHECK(aligned[i] && hak_node_of(aligned[i]) >= 0 && (uintptr_t)aligned[i] % align[i] == 0,
              "__libc_ aligned allocation %d: %p is not hakmem's or not aligned to %zu", i,
              aligned[i], align[i]);
        __libc_free(aligned[i]);
    }

    /* glibc's mallopt returns 1 for a parameter it does not know, and its
     * mallinfo would count none of hakmem's blocks. */
    CHECK(__libc_mallopt((int)opaque_size(12345), 1) == 0,
          "__libc_mallopt took an unknown parameter: not hakmem's mallopt");
    char *held = malloc(opaque_size(3 * MiB));
    struct mallinfo info = __libc_mallinfo();
    CHECK(info.hblkhd >= 0 && (size_t)info.hblkhd >= 3 * MiB,
          "__libc_mallinfo misses a 3 MiB block: hblkhd %d", info.hblkhd);
    free(held);

#ifdef OLD_CFREE
    /* glibc's would abort on hakmem's block. */
    void (*volatile bound_cfree)(void *) = old_cfree;
    void (*volatile own_free)(void *) = hak_free;
    CHECK(bound_cfree == own_free, "%s is bound to %p, not to hakmem's free", OLD_CFREE,
          (void *)bound_cfree);
    if (bound_cfree == own_free)
        old_cfree(malloc(opaque_size(100)));
#endif
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--info")) {
        void *held = malloc(opaque_size(3 * MiB));
        free(malloc(opaque_size(100 * KiB)));
        int status = malloc_info(0, stdout);
        free(held);
        return status == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
    }
    test_mallinfo2();
    test_mallinfo_saturates();
    test_mallopt();
    test_malloc_stats();
    test_malloc_info_options();
    test_libc_names();
    return test_result("test_glibc_ext");
}
