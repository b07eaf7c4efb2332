/* Misuse: each fault a program can commit against the allocator, at the
 * hardening level (HAKMEM_HARDEN) that is meant to catch it, ends its
 * process with hakmem's message naming the fault and the address on stderr
 * and SIGABRT; a write onto a level-2 guard page ends it with SIGSEGV at the
 * guard's first byte.  Level 0 stores free-list links plain, level 1 encodes
 * them, and no level leaves either in a block it hands out.
 *
 * Every case runs in a fresh process of its own (this program run again as
 * "test_misuse CASE", with HAKMEM_HARDEN set), so that the blocks it uses
 * come from fresh slabs and spans: the child tells on stdout the address it
 * is about to misuse, and the parent checks the child's end against it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hakmem.h"

/* C23's sized frees, which glibc declares from 2.43 on. */
void free_sized(void *ptr, size_t size);
void free_aligned_sized(void *ptr, size_t alignment, size_t size);

/* Sizes and the classes hakmem serves them from, at levels 1 and 2 alike
 * (level 2 adds 8 bytes of canary record, which these classes hold). */
#define SMALL_SIZE 120 /* C7: 128 B */
#define SMALL_CLASS_SIZE 128
#define MID_SIZE 5000   /* M8: 5 KiB, 12 to a 64 KiB span */
#define L25_SIZE 100000 /* L6: 112 KiB, a span of its own */
#define L25_CLASS_SIZE (112 * KiB)
#define LARGE_SIZE (2 * MiB)
#define SUPERSLAB_SIZE (2 * MiB)
#define SLAB_SIZE (64 * KiB)
#define PAGE_SIZE_4K (4 * KiB)

/* ---- the child: one fault ---- */

/* The address the fault is about; written with write(2), since stdio would
 * allocate a buffer and so change which blocks the case gets. */
static void tell(const char *key, const void *addr)
{
    char line[64];
    int len = snprintf(line, sizeof(line), "%s=0x%016lx\n", key, (unsigned long)(uintptr_t)addr);
    if (write(STDOUT_FILENO, line, (size_t)len) != len) {
        _exit(EXIT_HARD_ERROR);
    }
}

static void *must_malloc(size_t size)
{
    void *block = malloc(opaque_size(size));
    if (block == NULL) {
        _exit(EXIT_HARD_ERROR);
    }
    memset(block, 0x5a, size);
    return block;
}

static void *fault_ptr(void *ptr)
{
    void *volatile hidden = ptr;
    return hidden;
}

static void double_free(size_t size)
{
    char *block = must_malloc(size);
    free(block);
    tell("addr", block);
    free(fault_ptr(block));
}

/* A large block's head, on the page where the block starts (or the page
 * below, for a block that starts a page), replaced by a fresh page, as a
 * program's own mmap(MAP_FIXED) over it does (glibc's tst-free-errno
 * does, where glibc's head too sits inside the block's first page): a
 * free, a realloc or a malloc_usable_size of the block names the fault,
 * where it crashed. */
static void large_head_overwritten(const char *call)
{
    char *block = must_malloc(LARGE_SIZE);
    if (mmap((void *)large_block_head(block), PAGE_SIZE_4K, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
        _exit(EXIT_HARD_ERROR);
    tell("addr", block);
    if (!strcmp(call, "free"))
        free(fault_ptr(block));
    else if (!strcmp(call, "realloc"))
        block = realloc(fault_ptr(block), 2 * LARGE_SIZE);
    else
        tell("usable", (void *)malloc_usable_size(fault_ptr(block)));
}

/* A sized free that names another size than the block was asked with
 * (one byte more, which the block's class holds too). */
static void free_sized_wrong_size(size_t size)
{
    char *block = must_malloc(size);
    tell("addr", block);
    free_sized(fault_ptr(block), size + 1);
}

/* aligned_alloc's block given back with an alignment it lacks: twice its
 * address's lowest set bit. */
static void free_aligned_sized_wrong_alignment(size_t size)
{
    char *block = aligned_alloc(64, size);
    if (block == NULL)
        _exit(EXIT_HARD_ERROR);
    uintptr_t lacking = ((uintptr_t)block & -(uintptr_t)block) << 1;
    tell("addr", block);
    free_aligned_sized(fault_ptr(block), lacking, size);
}

/* A second block after the first: the first's slab or span may go back to
 * its backend (the HotSpanBox, for an L25 span) before the second free. */
static void double_free_after_another(size_t size)
{
    char *block = must_malloc(size);
    char *other = must_malloc(size);
    free(block);
    free(other);
    tell("addr", block);
    free(fault_ptr(block));
}

/* Level 2 keeps no cache: the first slab of 1 KiB blocks (C19) goes back to
 * the shared pool as soon as its last block is freed, and a second free of
 * one of its blocks finds a pooled slab. */
static void double_free_pooled_small(void)
{
    enum { COUNT = 100 };
    char *blocks[COUNT];
    for (int i = 0; i < COUNT; i++) {
        blocks[i] = must_malloc(1000);
    }
    uintptr_t first_slab = (uintptr_t)blocks[0] & ~(uintptr_t)(SLAB_SIZE - 1);
    for (int i = 0; i < COUNT; i++) {
        if (((uintptr_t)blocks[i] & ~(uintptr_t)(SLAB_SIZE - 1)) == first_slab) {
            free(blocks[i]);
        }
    }
    tell("addr", blocks[0]);
    free(fault_ptr(blocks[0]));
}

/* Level 1: a block whose slab malloc_trim sent back to the shared pool,
 * freed again once its first bytes read zero, as they do after the pool
 * gives the slab's pages back (or after a write to the freed block): no
 * tag tells the second free, the pooled slab does.  A block of another
 * class, made first, keeps its SuperSlab in use, and so mapped where
 * there is no region (under an address-space limit). */
static void double_free_trimmed_small(void)
{
    char *keep = must_malloc(16);
    char *block = must_malloc(1000);
    free(block);
    malloc_trim(0);
    memset(fault_ptr(block), 0, 16);
    tell("addr", block);
    free(fault_ptr(block));
    free(keep);
}

/* realloc of a pointer inside an L25 block (its span's first page off the
 * block's start, or another page), which realloc itself refuses, as the
 * long way through the span's slab does (a Mid block's is refused by the
 * free after the move, whichever way realloc found its size). */
static void realloc_interior(size_t size, size_t offset)
{
    char *block = must_malloc(size);
    tell("addr", block + offset);
    char *moved = realloc(fault_ptr(block + offset), 2 * size);
    free(moved);
}

/* realloc of a freed block: never resized in place (a freed large block
 * lies in the cache, which splits, merges and moves mappings). */
static void realloc_freed(size_t size, size_t new_size)
{
    char *block = must_malloc(size);
    free(block);
    tell("addr", block);
    char *moved = realloc(fault_ptr(block), new_size);
    free(moved);
}

/* Two adjacent large blocks freed merge into one cached mapping, whose head
 * the first block's pointer then finds: a second free of it is still a
 * double free. */
static void double_free_merged_large(void)
{
    size_t size = 4 * MiB - PAGE_SIZE_4K;
    char *first = must_malloc(size);
    char *second = must_malloc(size);
    free(first);
    free(second);
    tell("addr", first);
    free(fault_ptr(first));
}

static void interior_free_of(char *block, size_t offset)
{
    tell("addr", block + offset);
    free(fault_ptr(block + offset));
}

static void interior_free(size_t size, size_t offset)
{
    interior_free_of(must_malloc(size), offset);
}

/* Level 0's fast path checks nothing, but its slow paths refuse what
 * starts no block.  After a teardown of more blocks than the cache holds,
 * every free of the class fills the cache and goes straight on to its slab
 * (hak_heap_flush): there too. */
#define TEARDOWN_BLOCKS 20000

static void interior_free_flushing(void)
{
    static void *blocks[TEARDOWN_BLOCKS];
    for (size_t i = 0; i < TEARDOWN_BLOCKS; i++)
        blocks[i] = must_malloc(SMALL_SIZE);
    for (size_t i = 1; i < TEARDOWN_BLOCKS; i++)
        free(blocks[i]);
    interior_free_of(blocks[0], 16);
}

/* The first block of a class in a fresh process starts its slab or span. */
static char *first_block(size_t size, size_t align)
{
    char *block = must_malloc(size);
    if ((uintptr_t)block % align != 0) {
        fprintf(stderr, "ERROR: the first %zu-byte block %p does not start a slab\n", size,
                (void *)block);
        _exit(EXIT_HARD_ERROR);
    }
    return block;
}

static void never_handed_out(char *ptr)
{
    tell("addr", ptr);
    free(fault_ptr(ptr));
}

/* Where a block would start after the last of a 64 KiB slab of a class
 * whose size does not divide it: the slab's blocks all handed out, so that
 * its last page is carved.  The blocks stay live. */
static char *past_last_block(size_t size)
{
    char *first = first_block(size, SLAB_SIZE);
    size_t count = SLAB_SIZE / size;
    for (size_t i = 1; i < count; i++)
        must_malloc(size);
    return first + count * size;
}

/* A write after free clears the link word; the malloc that pops the block
 * follows the link. */
static void corrupt_free_list(void)
{
    char *block = must_malloc(64);
    free(block);
    memset(fault_ptr(block), 0, sizeof(void *));
    tell("addr", block);
    void *again = malloc(opaque_size(64));
    void *next = malloc(opaque_size(64));
    fprintf(stderr, "malloc went on: %p %p\n", again, next);
}

/* One byte past the requested size, as a stray terminating NUL writes it. */
static void overflow(size_t size)
{
    char *block = must_malloc(size);
    ((char *)fault_ptr(block))[size] = 0;
    tell("addr", block);
    free(block);
}

/* A free of the block the next malloc would hand out, from the cache. */
static void free_cached(void)
{
    char *block = must_malloc(SMALL_SIZE);
    char *cached = block + SMALL_CLASS_SIZE;
    tell("addr", cached);
    free(fault_ptr(cached));
}

/* A write past the block reaches the link of the block after it, which the
 * next malloc hands out and so checks. */
static void overflow_into_cache(void)
{
    char *block = must_malloc(SMALL_SIZE);
    memset(fault_ptr(block + SMALL_SIZE), 'A', SMALL_CLASS_SIZE - SMALL_SIZE + 8);
    tell("addr", block + SMALL_CLASS_SIZE);
    void *next = malloc(opaque_size(SMALL_SIZE));
    fprintf(stderr, "malloc went on: %p\n", next);
}

/* A write just under a block lands in the canary of the live block before
 * it, which the program never frees: the free of the block checks it. */
static void underflow(size_t size)
{
    char *before = must_malloc(size);
    char *block = must_malloc(size);
    ((char *)fault_ptr(block))[-1] = 0;
    tell("addr", before);
    free(block);
}

/* An overflow of a block never freed: the free of the block after it
 * checks it. */
static void overflow_kept(size_t size)
{
    char *block = must_malloc(size);
    char *after = must_malloc(size);
    ((char *)fault_ptr(block))[size] = 0;
    tell("addr", block);
    free(after);
}

static void report_fault(int signal_number, siginfo_t *info, void *context)
{
    (void)context;
    tell("fault", info->si_addr);
    signal(signal_number, SIG_DFL);
    raise(signal_number);
}

/* A SIGSEGV tells its address (report_fault) before the child dies of it. */
static void report_segv(void)
{
    struct sigaction action;
    memset(&action, 0, sizeof(action));
    action.sa_sigaction = report_fault;
    action.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &action, NULL);
}

/* Writes forward from the end of the block until something faults; the
 * handler tells where, and the child dies of SIGSEGV. */
static void write_to_guard(size_t size, const char *expected_key, const void *expected)
{
    report_segv();
    volatile char *block = must_malloc(size);
    tell(expected_key, expected ? expected : (const void *)(block + size));
    for (size_t i = size; i < size + 4 * MiB; i++) {
        block[i] = 1;
    }
    fprintf(stderr, "no fault within 4 MiB past the block\n");
}

/* Level 2: a block freed is a guard, but for its first page (L25) or
 * whole (large, cached). */
static void write_after_free(size_t size, size_t offset)
{
    report_segv();
    volatile char *block = must_malloc(size);
    free((void *)block);
    tell("expect", (const void *)(block + offset));
    block[offset] = 1;
}

static void guard_small(void)
{
    /* C19 (1 KiB) at level 2: the slab's last page is its guard. */
    char *block = malloc(opaque_size(1000));
    if (block == NULL) {
        _exit(EXIT_HARD_ERROR);
    }
    char *guard =
        (char *)((uintptr_t)block & ~(uintptr_t)(SLAB_SIZE - 1)) + SLAB_SIZE - PAGE_SIZE_4K;
    free(block);
    write_to_guard(1000, "expect", guard);
}

/* Level 2: a write just under a SuperSlab's first block, the first block
 * of a fresh process, faults on the header's last page, as one under any
 * other slab's first block faults on the slab below's guard. */
static void guard_below_first_small(void)
{
    report_segv();
    volatile char *block = must_malloc(SMALL_SIZE);
    if ((uintptr_t)block % SUPERSLAB_SIZE != SLAB_SIZE) { /* the first slab past the header's */
        _exit(EXIT_HARD_ERROR);
    }
    tell("expect", (const void *)(block - 1));
    block[-1] = 1;
}

/* Plain or encoded: the first word of the last block freed, compared with
 * the block freed before it. */
static void links(int want_plain)
{
    void *first = must_malloc(64);
    void *second = must_malloc(64);
    free(first);
    free(second);
    void *link = *(void *volatile *)fault_ptr(second);
    _exit((link == first) == want_plain ? EXIT_SUCCESS : EXIT_FAILURE);
}

/* Whether block shows either word of the free list it came from. */
static bool shows_free_list(const void *block)
{
    const uintptr_t *words = fault_ptr((void *)block);
    return words[0] != 0 || words[1] != 0;
}

/* No block handed out shows its free-list words: its link would give the
 * key away (the key XOR the address the next malloc returns), plain it
 * gives addresses.  Blocks fresh from their slab or span, then the same
 * blocks again from the cache, with posix_memalign's among them, in small,
 * Mid and L25 classes; each is written whole before it is freed. */
static void handed_out_clean(void)
{
    static const size_t sizes[] = {16, 64, SMALL_SIZE, 1024, MID_SIZE, 32 * KiB, L25_SIZE};
    enum { BLOCKS = 200, ROUNDS = 3 };
    static void *blocks[BLOCKS];
    int shown = 0;
    for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
        for (int round = 0; round < ROUNDS; round++) {
            for (int i = 0; i < BLOCKS; i++) {
                void *block = NULL;
                if (i % 4 == 3 && posix_memalign(&block, 64, opaque_size(sizes[s])) != 0)
                    _exit(EXIT_HARD_ERROR);
                if (block == NULL && (block = malloc(opaque_size(sizes[s]))) == NULL)
                    _exit(EXIT_HARD_ERROR);
                shown += shows_free_list(block);
                memset(block, 0x5a, sizes[s]);
                blocks[i] = block;
            }
            for (int i = 0; i < BLOCKS; i++)
                free(blocks[i]);
        }
    }
    _exit(shown == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

/* Whether any word of block's size bytes is not zero. */
static bool written(const void *block, size_t size)
{
    const uint64_t *words = fault_ptr((void *)block);
    for (size_t i = 0; i < size / sizeof(uint64_t); i++)
        if (words[i] != 0)
            return true;
    return false;
}

enum { REUSED_BLOCKS = 20000 };

/* How many blocks of size reused_clean takes: 4 MiB of them. */
static size_t reused_count(size_t size)
{
    return 4 * MiB / size < REUSED_BLOCKS ? 4 * MiB / size : REUSED_BLOCKS;
}

static void *reused_blocks[REUSED_BLOCKS];

/* In a thread of its own (reused_clean): reused_count blocks of *size,
 * zeroed and freed. */
static void *many_zeroed_and_freed(void *size)
{
    size_t bytes = *(const size_t *)size;
    size_t count = reused_count(bytes);
    for (size_t i = 0; i < count; i++) {
        reused_blocks[i] = must_malloc(bytes);
        memset(reused_blocks[i], 0, bytes);
    }
    for (size_t i = 0; i < count; i++)
        free(reused_blocks[i]);
    return NULL;
}

/* In a thread of its own: how many blocks of *size show a word set. */
static void *count_written(void *size)
{
    size_t bytes = *(const size_t *)size;
    size_t count = reused_count(bytes);
    uintptr_t shown = 0;
    for (size_t i = 0; i < count; i++) {
        reused_blocks[i] = malloc(opaque_size(bytes));
        if (reused_blocks[i] == NULL)
            _exit(EXIT_HARD_ERROR);
        shown += written(reused_blocks[i], bytes);
    }
    for (size_t i = 0; i < count; i++)
        free(reused_blocks[i]);
    return (void *)shown;
}

/* The same for one block. */
static void *one_zeroed_and_freed(void *size)
{
    size_t bytes = *(const size_t *)size;
    void *block = must_malloc(bytes);
    memset(block, 0, bytes);
    free(block);
    return NULL;
}

static void *in_new_thread(void *(*work)(void *), size_t size)
{
    pthread_t thread;
    void *result;
    if (pthread_create(&thread, NULL, work, &size) != 0 || pthread_join(thread, &result) != 0)
        _exit(EXIT_HARD_ERROR);
    return result;
}

/* Frees of a block the main thread's heap owns, by a thread with a heap of
 * its own, which sends such blocks home rather than caching them: the
 * block, twice (foreign_twice), a pointer 16 bytes into it, or the start
 * of a block past the last of the main thread's slab (past_last_block). */
static char *foreign_block;

static void *foreign_frees(void *how)
{
    free(must_malloc(SMALL_SIZE)); /* a heap of this thread's own */
    const char *name = how;
    if (!strcmp(name, "double_free_foreign")) {
        free(foreign_block);
        tell("addr", foreign_block);
        free(fault_ptr(foreign_block));
    } else if (!strcmp(name, "never_past_last_foreign")) {
        tell("addr", foreign_block);
        free(fault_ptr(foreign_block));
    } else {
        tell("addr", foreign_block + 16);
        free(fault_ptr(foreign_block + 16));
    }
    return NULL;
}

static void foreign_free(const char *name)
{
    if (!strcmp(name, "never_past_last_foreign"))
        foreign_block = past_last_block(48);
    else
        foreign_block = must_malloc(SMALL_SIZE);
    pthread_t thread;
    if (pthread_create(&thread, NULL, foreign_frees, (void *)name) != 0 ||
        pthread_join(thread, NULL) != 0)
        _exit(EXIT_HARD_ERROR);
}

/* The other order: another thread's free, then the owner's, while the
 * block still waits in the other thread's heap to go home (which its exit
 * would send it). */
static atomic_bool foreign_freed;

static void *free_foreign_block(void *unused)
{
    (void)unused;
    free(must_malloc(SMALL_SIZE));
    free(foreign_block);
    atomic_store(&foreign_freed, true);
    for (;;)
        pause();
    return NULL;
}

static void double_free_foreign_then_owner(void)
{
    foreign_block = must_malloc(SMALL_SIZE);
    pthread_t thread;
    if (pthread_create(&thread, NULL, free_foreign_block, NULL) != 0)
        _exit(EXIT_HARD_ERROR);
    while (!atomic_load(&foreign_freed))
        sched_yield();
    tell("addr", foreign_block);
    free(fault_ptr(foreign_block));
}

/* Memory that held blocks of one class, zeroed by the program before it
 * freed them, comes back as blocks of another class, of a span's class or
 * as node blocks, at other offsets: nothing hakmem wrote there as a
 * free-list word shows (levels 0 and 1; level 2 leaves its canaries).
 * Enough blocks that most of their slabs and spans empty and go back.
 * Then the same across threads, for a slab that serves its class twice
 * before it takes another (below). */
static void reused_clean(void)
{
    static const size_t pairs[][2] = {
        {16, 32}, {64, 256}, {256, 1024}, {1024, 4096}, {MID_SIZE, 8 * KiB}, {MID_SIZE, L25_SIZE},
    };
    enum { NODE_BLOCKS = 64 };
    int shown = 0;
    for (size_t p = 0; p < sizeof(pairs) / sizeof(pairs[0]); p++) {
        size_t count = reused_count(pairs[p][0]);
        for (size_t i = 0; i < count; i++) {
            reused_blocks[i] = must_malloc(pairs[p][0]);
            memset(reused_blocks[i], 0, pairs[p][0]);
        }
        int node = hak_node_of(reused_blocks[0]);
        for (size_t i = 0; i < count; i++)
            free(reused_blocks[i]);
        size_t later = reused_count(pairs[p][1]);
        for (size_t i = 0; i < later; i++) {
            reused_blocks[i] = malloc(opaque_size(pairs[p][1]));
            if (reused_blocks[i] == NULL)
                _exit(EXIT_HARD_ERROR);
            shown += written(reused_blocks[i], pairs[p][1]);
        }
        for (size_t i = 0; i < later; i++)
            free(reused_blocks[i]);
        if (pairs[p][0] > 1024) {
            for (size_t i = 0; i < count; i++) {
                reused_blocks[i] = must_malloc(pairs[p][0]);
                memset(reused_blocks[i], 0, pairs[p][0]);
            }
            for (size_t i = 0; i < count; i++)
                free(reused_blocks[i]);
            for (int i = 0; i < NODE_BLOCKS; i++) {
                reused_blocks[i] = hak_malloc_onnode(8 * KiB, node);
                if (reused_blocks[i] == NULL)
                    _exit(EXIT_HARD_ERROR);
                shown += written(reused_blocks[i], 8 * KiB);
            }
            for (int i = 0; i < NODE_BLOCKS; i++)
                free(reused_blocks[i]);
        }
    }
    /* Slabs of one class, emptied by a thread that exits, serve the class
     * again to the next thread, which carves less of one, then another
     * class to a third: the first thread's words past the second's carve
     * go too.  Each new thread's heap takes its slabs from the pool. */
    in_new_thread(many_zeroed_and_freed, 64);
    in_new_thread(one_zeroed_and_freed, 64);
    shown += (int)(uintptr_t)in_new_thread(count_written, 80);
    _exit(shown == 0 ? EXIT_SUCCESS : EXIT_FAILURE);
}

static void run_case(const char *name)
{
    if (!strcmp(name, "double_free_small")) {
        double_free(SMALL_SIZE);
    } else if (!strcmp(name, "double_free_mid")) {
        double_free(MID_SIZE);
    } else if (!strcmp(name, "double_free_l25")) {
        double_free(L25_SIZE);
    } else if (!strcmp(name, "double_free_large")) {
        double_free(LARGE_SIZE);
    } else if (!strcmp(name, "interior_small")) {
        interior_free(SMALL_SIZE, 16);
    } else if (!strcmp(name, "interior_small_flushing")) {
        interior_free_flushing();
    } else if (!strcmp(name, "interior_mid")) {
        interior_free(MID_SIZE, 64);
    } else if (!strcmp(name, "interior_l25")) {
        interior_free(L25_SIZE, 48);
    } else if (!strcmp(name, "interior_l25_page")) {
        interior_free(L25_SIZE, 2 * PAGE_SIZE_4K);
    } else if (!strcmp(name, "interior_large")) {
        interior_free(LARGE_SIZE, PAGE_SIZE_4K);
    } else if (!strcmp(name, "interior_aligned_small")) {
        /* 768 B blocks are 256-aligned: block + 256 is aligned as a block
         * is, yet starts none (a test of alignment alone let it through). */
        interior_free(700, 256);
    } else if (!strcmp(name, "never_superslab_header")) {
        char *block = must_malloc(SMALL_SIZE);
        never_handed_out((char *)((uintptr_t)block & ~(uintptr_t)(SUPERSLAB_SIZE - 1)));
    } else if (!strcmp(name, "never_small_uncarved")) {
        /* C15 (512 B): carving has reached 16 KiB at most. */
        never_handed_out(first_block(512, SLAB_SIZE) + 32 * KiB);
    } else if (!strcmp(name, "never_mid_uncarved")) {
        /* M1 (1.5 KiB) in a 64 KiB span, of which the first refill
         * carves some 46 KiB. */
        never_handed_out(first_block(1300, PAGE_SIZE_4K) + 60 * KiB);
    } else if (!strcmp(name, "never_small_past_last")) {
        never_handed_out(past_last_block(48));
    } else if (!strcmp(name, "never_mid_past_last")) {
        never_handed_out(past_last_block(3072));
    } else if (!strcmp(name, "never_small_straddling")) {
        /* C2 (48 B): block 85 starts in the first page, 16 B before its
         * end, and runs on into the second. */
        never_handed_out(first_block(48, SLAB_SIZE) + 85 * 48);
    } else if (!strcmp(name, "never_mid_next_uncarved")) {
        /* M13 (12.25 KiB): the first refill carves two blocks, one to hand
         * out and one for the cache; the third starts in the last page of
         * the second, which lies inside that. */
        never_handed_out(first_block(12000, PAGE_SIZE_4K) + 2 * 12544);
    } else if (!strcmp(name, "never_large_header")) {
        never_handed_out((char *)large_block_head(must_malloc(LARGE_SIZE)));
    } else if (!strcmp(name, "never_arena_header")) {
        char *block = first_block(1300, PAGE_SIZE_4K);
        never_handed_out((char *)((uintptr_t)block & ~(uintptr_t)(4 * MiB - 1)));
    } else if (!strcmp(name, "never_arena_free_span")) {
        /* The first span leaves the rest of its 4 MiB arena chunk (as
         * aligned as it is big) free. */
        char *block = first_block(1300, PAGE_SIZE_4K);
        never_handed_out((char *)((uintptr_t)block & ~(uintptr_t)(4 * MiB - 1)) + 3 * MiB);
    } else if (!strcmp(name, "corrupted_free_list")) {
        corrupt_free_list();
    } else if (!strcmp(name, "overflow_small")) {
        overflow(SMALL_SIZE);
    } else if (!strcmp(name, "overflow_mid")) {
        overflow(MID_SIZE);
    } else if (!strcmp(name, "overflow_l25")) {
        overflow(L25_SIZE);
    } else if (!strcmp(name, "overflow_large")) {
        overflow(LARGE_SIZE - 1000);
    } else if (!strcmp(name, "guard_small")) {
        guard_small();
    } else if (!strcmp(name, "guard_below_first_small")) {
        guard_below_first_small();
    } else if (!strcmp(name, "guard_mid")) {
        /* Twelve 5 KiB blocks, 4 KiB of slack, then the guard. */
        char *block = first_block(MID_SIZE, PAGE_SIZE_4K);
        free(block);
        write_to_guard(MID_SIZE, "expect", block + 64 * KiB);
    } else if (!strcmp(name, "guard_l25")) {
        char *block = first_block(L25_SIZE, PAGE_SIZE_4K);
        free(block);
        write_to_guard(L25_SIZE, "expect", block + L25_CLASS_SIZE);
    } else if (!strcmp(name, "guard_large")) {
        write_to_guard(LARGE_SIZE, "expect", NULL);
    } else if (!strcmp(name, "interior_node_block")) {
        /* Before this thread's first malloc it has no heap of its own:
         * hak_malloc_onnode places the block in a span of its own. */
        char *block = hak_malloc_onnode(SMALL_SIZE, 0);
        tell("addr", block + 16);
        free(fault_ptr(block + 16));
    } else if (!strcmp(name, "overflow_node_block")) {
        char *block = hak_malloc_onnode(SMALL_SIZE, 0);
        ((char *)fault_ptr(block))[SMALL_SIZE] = 0;
        tell("addr", block);
        free(block);
    } else if (!strcmp(name, "free_cached")) {
        free_cached();
    } else if (!strcmp(name, "double_free_foreign") || !strcmp(name, "interior_foreign") ||
               !strcmp(name, "never_past_last_foreign")) {
        foreign_free(name);
    } else if (!strcmp(name, "double_free_foreign_then_owner")) {
        double_free_foreign_then_owner();
    } else if (!strcmp(name, "overflow_into_cache")) {
        overflow_into_cache();
    } else if (!strcmp(name, "underflow_small")) {
        underflow(SMALL_SIZE);
    } else if (!strcmp(name, "underflow_mid")) {
        underflow(MID_SIZE);
    } else if (!strcmp(name, "overflow_kept_small")) {
        overflow_kept(SMALL_SIZE);
    } else if (!strcmp(name, "overflow_kept_mid")) {
        overflow_kept(MID_SIZE);
    } else if (!strcmp(name, "write_after_free_l25")) {
        write_after_free(L25_SIZE, PAGE_SIZE_4K);
    } else if (!strcmp(name, "write_after_free_large")) {
        write_after_free(LARGE_SIZE, 0);
    } else if (!strcmp(name, "realloc_freed_large")) {
        realloc_freed(4 * MiB, 64 * MiB);
    } else if (!strcmp(name, "realloc_interior_l25")) {
        realloc_interior(L25_SIZE, 48);
    } else if (!strcmp(name, "realloc_interior_l25_page")) {
        realloc_interior(L25_SIZE, 2 * PAGE_SIZE_4K);
    } else if (!strcmp(name, "realloc_freed_small")) {
        realloc_freed(40, 36);
    } else if (!strcmp(name, "double_free_merged_large")) {
        double_free_merged_large();
    } else if (!strcmp(name, "double_free_pooled_small")) {
        double_free_pooled_small();
    } else if (!strcmp(name, "double_free_trimmed_small")) {
        double_free_trimmed_small();
    } else if (!strncmp(name, "double_free_after_another_", 26)) {
        double_free_after_another(strtoul(name + 26, NULL, 10));
    } else if (!strncmp(name, "large_head_overwritten_", 23)) {
        large_head_overwritten(name + 23);
    } else if (!strcmp(name, "free_sized_wrong_size_small")) {
        free_sized_wrong_size(SMALL_SIZE);
    } else if (!strcmp(name, "free_sized_wrong_size_l25")) {
        free_sized_wrong_size(L25_SIZE);
    } else if (!strcmp(name, "free_sized_wrong_size_large")) {
        free_sized_wrong_size(LARGE_SIZE);
    } else if (!strcmp(name, "free_aligned_sized_wrong_alignment")) {
        free_aligned_sized_wrong_alignment(MID_SIZE);
    } else if (!strcmp(name, "links_plain")) {
        links(1);
    } else if (!strcmp(name, "links_encoded")) {
        links(0);
    } else if (!strcmp(name, "handed_out_clean")) {
        handed_out_clean();
    } else if (!strcmp(name, "reused_clean")) {
        reused_clean();
    } else {
        fprintf(stderr, "unknown case %s\n", name);
        _exit(EXIT_HARD_ERROR);
    }
    fprintf(stderr, "the fault went unnoticed\n");
    _exit(EXIT_FAILURE);
}

/* ---- the parent: every case, and what must come of it ---- */

/* A note of any text. */
static const char any_note[] = "any";

struct misuse_case {
    const char *name;
    const char *level;
    /* SIGABRT: stderr holds "hakmem: WHAT ADDR (NOTE)" (no NOTE when
     * NULL, any when any_note); SIGSEGV: the fault is at the address the
     * child expects; 0: the child exits with status 0. */
    int signal_number;
    const char *what;
    const char *note;
};

static const struct misuse_case cases[] = {
    {"double_free_small", "1", SIGABRT, "double free of", "class C7"},
    {"double_free_mid", "1", SIGABRT, "double free of", "class M8"},
    {"double_free_l25", "1", SIGABRT, "double free of", "class L6"},
    {"double_free_large", "1", SIGABRT, "double free of", "large block"},
    {"interior_small", "1", SIGABRT, "free of a pointer inside a block:", "class C7"},
    {"interior_small_flushing", "0", SIGABRT, "free of a pointer inside a block:", "class C7"},
    {"interior_mid", "1", SIGABRT, "free of a pointer inside a block:", "class M8"},
    {"interior_l25", "1", SIGABRT, "free of a pointer inside a block:", "class L6"},
    {"interior_l25_page", "1", SIGABRT, "free of a pointer inside a block:", "class L6"},
    {"interior_l25_page", "0", SIGABRT, "free of a pointer inside a block:", "class L6"},
    {"interior_large", "1", SIGABRT, "free of a pointer inside a block:", "large block"},
    {"never_superslab_header", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_small_uncarved", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_mid_uncarved", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_mid_next_uncarved", "1", SIGABRT, "free of a pointer inside a block:", "class M13"},
    {"never_small_past_last", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_mid_past_last", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_small_straddling", "1", SIGABRT, "double free of", "class C2"},
    {"never_past_last_foreign", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_large_header", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_arena_header", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"never_arena_free_span", "1", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"corrupted_free_list", "1", SIGABRT, "corrupted free list (a freed block was written to) at",
     NULL},
    {"interior_node_block", "1", SIGABRT, "free of a pointer inside a block:", "node block"},
    {"free_cached", "1", SIGABRT, "double free of", "class C7"},
    {"double_free_foreign", "1", SIGABRT, "double free of", "class C7"},
    {"double_free_foreign_then_owner", "1", SIGABRT, "double free of", "class C7"},
    {"interior_foreign", "1", SIGABRT, "free of a pointer inside a block:", "class C7"},
    {"overflow_into_cache", "1", SIGABRT, "corrupted free list (a freed block was written to) at",
     NULL},
    {"links_encoded", "1", 0, NULL, NULL},
    {"links_plain", "0", 0, NULL, NULL},
    {"handed_out_clean", "0", 0, NULL, NULL},
    {"handed_out_clean", "1", 0, NULL, NULL},
    {"handed_out_clean", "2", 0, NULL, NULL},
    {"reused_clean", "0", 0, NULL, NULL},
    {"reused_clean", "1", 0, NULL, NULL},
    {"double_free_small", "2", SIGABRT, "double free of", "class C7"},
    {"double_free_l25", "2", SIGABRT, "double free of", "class L6"},
    {"double_free_large", "2", SIGABRT, "double free of", "large block"},
    {"double_free_pooled_small", "2", SIGABRT, "double free of", "class C19"},
    {"double_free_trimmed_small", "1", SIGABRT, "double free of", "class C19"},
    {"realloc_freed_large", "1", SIGABRT, "realloc of a freed block:", "large block"},
    {"realloc_freed_large", "2", SIGABRT, "realloc of a freed block:", "large block"},
    {"realloc_freed_small", "2", SIGABRT, "realloc of a freed block:", "class C2"},
    {"realloc_interior_l25", "1", SIGABRT, "pointer inside a block", NULL},
    {"realloc_interior_l25", "0", SIGABRT, "pointer inside a block", NULL},
    {"realloc_interior_l25_page", "1", SIGABRT, "pointer inside a block", NULL},
    {"double_free_merged_large", "1", SIGABRT, "double free of", "large block"},
    {"interior_aligned_small", "1", SIGABRT, "free of a pointer inside a block:", "class C17"},
    {"interior_aligned_small", "2", SIGABRT, "free of a pointer inside a block:", "class C17"},
    {"never_small_uncarved", "2", SIGABRT, "free of a pointer hakmem never handed out:", NULL},
    {"overflow_small", "2", SIGABRT, "heap overflow past block", "class C7"},
    {"overflow_mid", "2", SIGABRT, "heap overflow past block", "class M8"},
    {"overflow_l25", "2", SIGABRT, "heap overflow past block", "class L6"},
    {"overflow_large", "2", SIGABRT, "heap overflow past block", "large block"},
    {"overflow_node_block", "2", SIGABRT, "heap overflow past block", "node block"},
    {"underflow_small", "2", SIGABRT, "heap overflow past block", "class C7"},
    {"underflow_mid", "2", SIGABRT, "heap overflow past block", "class M8"},
    {"overflow_kept_small", "2", SIGABRT, "heap overflow past block", "class C7"},
    {"overflow_kept_mid", "2", SIGABRT, "heap overflow past block", "class M8"},
    {"large_head_overwritten_free", "1", SIGABRT,
     "pointer into a chunk whose head was overwritten:", NULL},
    {"large_head_overwritten_free", "2", SIGABRT,
     "pointer into a chunk whose head was overwritten:", NULL},
    {"large_head_overwritten_realloc", "1", SIGABRT,
     "pointer into a chunk whose head was overwritten:", NULL},
    {"large_head_overwritten_usable", "1", SIGABRT,
     "pointer into a chunk whose head was overwritten:", NULL},
    {"free_sized_wrong_size_small", "2", SIGABRT,
     "free_sized with a size other than the block's:", NULL},
    {"free_sized_wrong_size_l25", "2", SIGABRT,
     "free_sized with a size other than the block's:", NULL},
    {"free_sized_wrong_size_large", "2", SIGABRT,
     "free_sized with a size other than the block's:", NULL},
    {"free_aligned_sized_wrong_alignment", "2", SIGABRT,
     "free_aligned_sized with a size or alignment other than the block's:", NULL},
    {"write_after_free_l25", "2", SIGSEGV, NULL, NULL},
    {"write_after_free_large", "2", SIGSEGV, NULL, NULL},
    {"guard_small", "2", SIGSEGV, NULL, NULL},
    {"guard_below_first_small", "2", SIGSEGV, NULL, NULL},
    {"guard_mid", "2", SIGSEGV, NULL, NULL},
    {"guard_l25", "2", SIGSEGV, NULL, NULL},
    {"guard_large", "2", SIGSEGV, NULL, NULL},
};

/* The value of "key=0x..." in the child's stdout, or NULL. */
static const char *told(const char *out, const char *key, char value[32])
{
    char prefix[16];
    snprintf(prefix, sizeof(prefix), "%s=", key);
    const char *at = strstr(out, prefix);
    if (at == NULL) {
        return NULL;
    }
    at += strlen(prefix);
    size_t len = strcspn(at, "\n");
    if (len >= 32) {
        return NULL;
    }
    memcpy(value, at, len);
    value[len] = 0;
    return value;
}

static void run_child(const char *self, const struct misuse_case *c, int *status, char *out,
                      size_t out_size, char *err, size_t err_size)
{
    int out_pipe[2], err_pipe[2];
    if (pipe(out_pipe) != 0 || pipe(err_pipe) != 0) {
        hard_error("pipe: %s", strerror(errno));
    }
    pid_t pid = fork_fault_child(60);
    if (pid == 0) {
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(err_pipe[1], STDERR_FILENO);
        close(out_pipe[0]);
        close(err_pipe[0]);
        setenv("HAKMEM_HARDEN", c->level, 1);
        execl(self, self, c->name, (char *)NULL);
        _exit(EXIT_HARD_ERROR);
    }
    close(out_pipe[1]);
    close(err_pipe[1]);
    read_all(out_pipe[0], out, out_size);
    read_all(err_pipe[0], err, err_size);
    close(out_pipe[0]);
    close(err_pipe[0]);
    if (waitpid(pid, status, 0) != pid) {
        hard_error("waitpid: %s", strerror(errno));
    }
}

static void check_case(const char *self, const struct misuse_case *c)
{
    char out[4096], err[4096], addr[32], expected[256];
    int status;
    run_child(self, c, &status, out, sizeof(out), err, sizeof(err));
    if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_HARD_ERROR) {
        hard_error("%s (HAKMEM_HARDEN=%s) could not set up its case:\n%s", c->name, c->level, err);
    }
    if (c->signal_number == 0) {
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
              "%s (HAKMEM_HARDEN=%s): status 0x%x; stderr:\n%s", c->name, c->level, status, err);
        return;
    }
    if (!WIFSIGNALED(status) || WTERMSIG(status) != c->signal_number) {
        CHECK(false, "%s (HAKMEM_HARDEN=%s): expected %s, got status 0x%x; stderr:\n%s", c->name,
              c->level, strsignal(c->signal_number), status, err);
        return;
    }
    if (c->signal_number == SIGSEGV) {
        char fault[32];
        const char *want = told(out, "expect", addr);
        const char *got = told(out, "fault", fault);
        CHECK(want && got && !strcmp(want, got),
              "%s (HAKMEM_HARDEN=%s): the write faulted at %s, the guard page starts at %s",
              c->name, c->level, got ? got : "(not told)", want ? want : "(not told)");
        return;
    }
    if (told(out, "addr", addr) == NULL) {
        CHECK(false, "%s (HAKMEM_HARDEN=%s): the child aborted before the fault; stderr:\n%s",
              c->name, c->level, err);
        return;
    }
    if (c->note == any_note) {
        snprintf(expected, sizeof(expected), "hakmem: %s %s (", c->what, addr);
    } else if (c->note) {
        snprintf(expected, sizeof(expected), "hakmem: %s %s (%s)\n", c->what, addr, c->note);
    } else {
        snprintf(expected, sizeof(expected), "hakmem: %s %s\n", c->what, addr);
    }
    CHECK(strstr(err, expected) != NULL, "%s (HAKMEM_HARDEN=%s): expected on stderr: %sgot: %s",
          c->name, c->level, expected, err);
}

/* A block freed twice, with another freed in between, is a double free at
 * every size from the last Mid class over every L25 class to a large block,
 * whether its span went back to the HotSpanBox or its cache kept it (issue
 * 15: L25 blocks from 200,000 bytes, and at level 2 all from 32 KiB, were
 * called never handed out).  Each size is the top of its class less room
 * for level 2's canary, then the sizes the issue named, then a large block. */
static size_t double_free_sweep(const char *self)
{
    size_t sizes[24];
    size_t n = 0;
    sizes[n++] = 32 * KiB - 64;
    for (unsigned doubling = 15; doubling <= 19; doubling++) {
        for (unsigned quarter = 5; quarter <= 8; quarter++) {
            sizes[n++] = ((size_t)quarter << (doubling - 2)) - 64;
        }
    }
    sizes[n++] = 200000;
    sizes[n++] = 1040000;
    sizes[n++] = LARGE_SIZE;
    static const char *const levels[] = {"1", "2"};
    for (size_t l = 0; l < 2; l++) {
        for (size_t i = 0; i < n; i++) {
            char name[64];
            snprintf(name, sizeof(name), "double_free_after_another_%zu", sizes[i]);
            struct misuse_case c = {name, levels[l], SIGABRT, "double free of", any_note};
            check_case(self, &c);
        }
    }
    return 2 * n;
}

int main(int argc, char **argv)
{
    if (argc == 2) {
        run_case(argv[1]);
    }
    if (under_valgrind()) {
        printf("test_misuse: skipped under valgrind (memcheck reports the faults itself)\n");
        return EXIT_SKIP;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) {
        hard_error("readlink /proc/self/exe: %s", strerror(errno));
    }
    self[len] = 0;
    size_t count = sizeof(cases) / sizeof(cases[0]);
    for (size_t i = 0; i < count; i++) {
        check_case(self, &cases[i]);
    }
    count += double_free_sweep(self);
    printf("test_misuse: %zu cases\n", count);
    return test_result("test_misuse");
}
