/* A fuzz target for the whole allocation API, called through the hak_ names.
 *
 * The input is read as a sequence of operations over a table of live blocks.
 * Each operation starts with an opcode byte and a slot byte; sizes and
 * alignments follow as described at decode_size and decode_alignment.  Any
 * byte string is a valid program: reading past the end yields zeros.  Every
 * live block is filled with a pattern keyed by a per-block number and checked
 * before it is freed or resized, new blocks must not overlap live ones, and
 * every result is held to glibc's contract (alignment, usable size, errno).
 * A helper thread frees and allocates on request, so that blocks also cross
 * threads.  A broken rule aborts with a message, which is what libFuzzer and
 * the replay driver report.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "hakmem.h"
#include "../harness.h"

#define SLOTS 32
/* Keeps a run fast and its memory far from the fuzzer's RSS limit. */
#define LIVE_BYTES_LIMIT (64 * MiB)
#define MAX_OPERATIONS 4096

/* The tiers' upper bounds, as documented in hakmem's README. */
#define SMALL_MAX (1 * KiB)
#define MID_MAX (32 * KiB)
#define L25_MAX (1 * MiB)
#define LARGE_FUZZ_MAX (4 * MiB)
#define ALIGNMENT_MAX (2 * MiB)

/* No address space can hold a block this large: a request for it must fail
 * with ENOMEM rather than succeed or crash. */
#define IMPOSSIBLE_SIZE (SIZE_MAX / 16)

enum operation {
    OP_MALLOC,
    OP_MALLOC_AGAIN, /* malloc is the common case in real programs */
    OP_CALLOC,
    OP_REALLOC,
    OP_REALLOCARRAY,
    OP_POSIX_MEMALIGN,
    OP_ALIGNED_ALLOC,
    OP_MEMALIGN,
    OP_VALLOC,
    OP_PVALLOC,
    OP_FREE,
    OP_FREE_AGAIN,
    OP_USE_USABLE_SIZE,
    OP_REMOTE_FREE,
    OP_REMOTE_MALLOC,
    OP_VERIFY_ALL,
    OPERATION_COUNT
};

struct live_block {
    unsigned char *ptr; /* NULL for an empty slot */
    size_t size;        /* bytes the pattern covers */
    uint64_t key;
};

struct input {
    const uint8_t *data;
    size_t size;
    size_t pos;
};

static struct live_block slots[SLOTS];
static size_t live_bytes;
static uint64_t blocks_made;
static size_t page_size;

static void fuzz_fail(const char *fmt, ...)
{
    va_list args;

    fprintf(stderr, "fuzz_api: ");
    va_start(args, fmt);
    vfprintf(stderr, fmt, args);
    va_end(args);
    fputc('\n', stderr);
    abort();
}

static unsigned next_byte(struct input *in)
{
    return in->pos < in->size ? in->data[in->pos++] : 0;
}

static size_t next_bytes(struct input *in, int count)
{
    size_t value = 0;

    for (int i = 0; i < count; i++) {
        value = value << 8 | next_byte(in);
    }
    return value;
}

static const size_t edge_sizes[] = {
    0,           1,       7,           8,           9,           15,          16,
    17,          255,     256,         257,         1023,        SMALL_MAX,   SMALL_MAX + 1,
    4095,        4096,    4097,        MID_MAX - 1, MID_MAX,     MID_MAX + 1, 65536,
    L25_MAX - 1, L25_MAX, L25_MAX + 1, 2 * MiB,     2 * MiB + 1,
};

static const size_t impossible_sizes[] = {
    (size_t)PTRDIFF_MAX + 1,
    SIZE_MAX,
    SIZE_MAX - 4095,
    SIZE_MAX - 15,
    SIZE_MAX / 4 * 3,
    (size_t)PTRDIFF_MAX,
    (size_t)PTRDIFF_MAX - 4095,
    IMPOSSIBLE_SIZE,
};

#define COUNT_OF(array) (sizeof(array) / sizeof((array)[0]))

/* A tier byte selects the range, then 0-3 bytes pick the size in it: half
 * of the sizes are small, three in sixteen mid, two L25 and one large, as in
 * real programs; the rest lie at the tier boundaries or, one in eight of
 * those, are impossible. */
static size_t decode_size(struct input *in)
{
    unsigned tier = next_byte(in);
    unsigned range = tier % 16;

    if (range < 8) {
        return next_bytes(in, 2) % (SMALL_MAX + 1);
    }
    if (range < 11) {
        return SMALL_MAX + 1 + next_bytes(in, 2) % (MID_MAX - SMALL_MAX);
    }
    if (range < 13) {
        return MID_MAX + 1 + next_bytes(in, 3) % (L25_MAX - MID_MAX);
    }
    if (range < 14) {
        return L25_MAX + 1 + next_bytes(in, 3) % (LARGE_FUZZ_MAX - L25_MAX);
    }
    if (tier / 16 % 8 == 0) {
        return impossible_sizes[next_byte(in) % COUNT_OF(impossible_sizes)];
    }
    return edge_sizes[next_byte(in) % COUNT_OF(edge_sizes)];
}

static const size_t odd_alignments[] = {
    0, 3, sizeof(void *) / 2, 12, 24, 48, 100, 3 * 4096, MiB + 8, SIZE_MAX,
};

/* Mostly powers of two from 1 to ALIGNMENT_MAX, sometimes one that is not. */
static size_t decode_alignment(struct input *in)
{
    unsigned selector = next_byte(in);

    if (selector < 224) {
        return (size_t)1 << (selector % 22);
    }
    return odd_alignments[selector % COUNT_OF(odd_alignments)];
}

static bool is_power_of_two(size_t value)
{
    return value != 0 && (value & (value - 1)) == 0;
}

static bool is_aligned(const void *ptr, size_t alignment)
{
    return ((uintptr_t)ptr & (alignment - 1)) == 0;
}

static size_t round_up(size_t value, size_t multiple)
{
    return (value + multiple - 1) / multiple * multiple;
}

/* Whether a request for size bytes must succeed: it fits in what this run
 * allows to be live, once the block in the slot being replaced is gone. */
static bool affordable(size_t size, size_t replaced)
{
    return size <= LIVE_BYTES_LIMIT && live_bytes - replaced + size <= LIVE_BYTES_LIMIT;
}

/* The pattern: word w of a block (bytes 8w to 8w + 7, or fewer at the end)
 * holds mix64(key + w).  It is written in full over the first and last
 * DENSE_BYTES of a block and in one word per SPARSE_STRIDE bytes between,
 * which still catches a stray free-list pointer (at the start of a block), a
 * neighbour's overrun (at the end) and a run of pages lost or shared, while
 * a multi-megabyte block costs a few hundred page faults, not a thousand.  A word's value depends
 * on its position only, so the prefix that realloc keeps is checked with the old pattern. */
#define DENSE_BYTES (8 * KiB)
#define SPARSE_STRIDE (16 * KiB)

static bool word_in_pattern(size_t offset, size_t size)
{
    return offset < DENSE_BYTES || offset + DENSE_BYTES >= size || offset % SPARSE_STRIDE == 0;
}

/* The offset of the pattern's word after the one at offset. */
static size_t next_word(size_t offset, size_t size)
{
    size_t next = offset + 8;

    if (word_in_pattern(next, size)) {
        return next;
    }
    size_t strided = round_up(next, SPARSE_STRIDE);
    size_t tail = round_up(size - DENSE_BYTES, 8);
    return strided < tail ? strided : tail;
}

static void put_word(unsigned char *ptr, size_t offset, size_t limit, uint64_t value)
{
    for (size_t i = offset; i < offset + 8 && i < limit; i++) {
        ptr[i] = (unsigned char)(value >> (8 * (i - offset)));
    }
}

static void fill_block(unsigned char *ptr, size_t size, uint64_t key)
{
    for (size_t offset = 0; offset < size; offset = next_word(offset, size)) {
        uint64_t value = mix64(key + offset / 8);
        if (offset + 8 <= size) {
            __builtin_memcpy(ptr + offset, &value, 8);
        } else {
            put_word(ptr, offset, size, value);
        }
    }
}

/* Checks the first checked bytes of a block whose pattern was written for
 * size bytes; returns the offset of the first wrong byte or PATTERN_INTACT. */
static size_t pattern_damage(const unsigned char *ptr, size_t checked, size_t size, uint64_t key)
{
    for (size_t offset = 0; offset < checked; offset = next_word(offset, size)) {
        uint64_t value = mix64(key + offset / 8), found;
        if (offset + 8 <= checked) {
            __builtin_memcpy(&found, ptr + offset, 8);
            if (found == value) {
                continue;
            }
        }
        for (size_t i = offset; i < offset + 8 && i < checked; i++) {
            if (ptr[i] != (unsigned char)(value >> (8 * (i - offset)))) {
                return i;
            }
        }
    }
    return PATTERN_INTACT;
}

/* Checks the bytes of a new calloc block where a pattern would go. */
static size_t zero_damage(const unsigned char *ptr, size_t size)
{
    for (size_t offset = 0; offset < size; offset = next_word(offset, size)) {
        for (size_t i = offset; i < offset + 8 && i < size; i++) {
            if (ptr[i] != 0) {
                return i;
            }
        }
    }
    return PATTERN_INTACT;
}

static void verify_block(const struct live_block *block, const char *when)
{
    size_t bad = pattern_damage(block->ptr, block->size, block->size, block->key);

    if (bad != PATTERN_INTACT) {
        fuzz_fail("%s: block %p of %zu bytes changed at offset %zu", when, (void *)block->ptr,
                  block->size, bad);
    }
}

static void check_no_overlap(const unsigned char *ptr, size_t size, int except_slot)
{
    size_t extent = size ? size : 1;

    for (int i = 0; i < SLOTS; i++) {
        const struct live_block *other = &slots[i];
        size_t other_extent = other->size ? other->size : 1;

        if (i == except_slot || other->ptr == NULL) {
            continue;
        }
        if (ptr < other->ptr + other_extent && other->ptr < ptr + extent) {
            fuzz_fail("new block %p (%zu bytes) overlaps live block %p (%zu bytes)", (void *)ptr,
                      size, (void *)other->ptr, other->size);
        }
    }
}

static uint64_t new_key(void)
{
    return mix64(++blocks_made);
}

/* The rules every successful allocation of size bytes obeys; alignment is
 * what the call promised.  The block gets the pattern of key. */
static void adopt_block(int slot, void *ptr, size_t size, size_t alignment, const char *call,
                        uint64_t key)
{
    size_t usable = hak_malloc_usable_size(ptr);

    if (!is_aligned(ptr, alignment)) {
        fuzz_fail("%s(%zu) returned %p, not aligned to %zu", call, size, ptr, alignment);
    }
    if (usable < size) {
        fuzz_fail("%s(%zu) returned %p with usable size %zu", call, size, ptr, usable);
    }
    check_no_overlap(ptr, size, slot);
    slots[slot] = (struct live_block){ptr, size, key};
    fill_block(ptr, size, key);
    live_bytes += size;
}

static void release_slot(int slot, const char *when)
{
    struct live_block *block = &slots[slot];

    if (block->ptr == NULL) {
        return;
    }
    verify_block(block, when);
    hak_free(block->ptr);
    live_bytes -= block->size;
    block->ptr = NULL;
}

static void expect_enomem(void *result, int error, const char *call, size_t size)
{
    if (result != NULL) {
        fuzz_fail("%s(%#zx) returned %p, expected NULL", call, size, result);
    }
    if (error != ENOMEM) {
        fuzz_fail("%s(%#zx) failed with errno %d, expected ENOMEM", call, size, error);
    }
}

/* malloc's promise: aligned for any object that fits in size bytes. */
static size_t fundamental_alignment(size_t size)
{
    return size >= 16 ? 16 : 8;
}

/* The helper thread: frees or allocates one block per request, so that the
 * fuzzed sequence also exercises frees of blocks that another thread's heap
 * owns. */
struct helper_request {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    bool pending;
    void *to_free;
    size_t to_allocate;
    void *allocated;
};

static struct helper_request helper = {
    PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, NULL, 0, NULL,
};
static pthread_once_t helper_started = PTHREAD_ONCE_INIT;

static void *run_helper(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&helper.lock);
    for (;;) {
        while (!helper.pending) {
            pthread_cond_wait(&helper.changed, &helper.lock);
        }
        if (helper.to_free != NULL) {
            hak_free(helper.to_free);
            helper.to_free = NULL;
        } else {
            helper.allocated = hak_malloc(helper.to_allocate);
        }
        helper.pending = false;
        pthread_cond_broadcast(&helper.changed);
    }
    return NULL;
}

static void start_helper(void)
{
    pthread_t thread;

    if (pthread_create(&thread, NULL, run_helper, NULL) != 0) {
        fuzz_fail("cannot start the helper thread");
    }
    pthread_detach(thread);
}

/* Hands a request to the helper and waits until it is done. */
static void *ask_helper(void *to_free, size_t to_allocate)
{
    pthread_once(&helper_started, start_helper);
    pthread_mutex_lock(&helper.lock);
    helper.to_free = to_free;
    helper.to_allocate = to_allocate;
    helper.allocated = NULL;
    helper.pending = true;
    pthread_cond_broadcast(&helper.changed);
    while (helper.pending) {
        pthread_cond_wait(&helper.changed, &helper.lock);
    }
    void *allocated = helper.allocated;
    pthread_mutex_unlock(&helper.lock);
    return allocated;
}

static void do_malloc(int slot, size_t size, bool remote)
{
    const char *call = remote ? "malloc in another thread" : "hak_malloc";

    if (size < IMPOSSIBLE_SIZE && !affordable(size, slots[slot].ptr ? slots[slot].size : 0)) {
        return;
    }
    release_slot(slot, "before malloc");
    errno = 0;
    void *ptr = remote ? ask_helper(NULL, size) : hak_malloc(size);
    if (size >= IMPOSSIBLE_SIZE) {
        if (!remote) {
            expect_enomem(ptr, errno, call, size);
        } else if (ptr != NULL) {
            fuzz_fail("%s(%#zx) returned %p, expected NULL", call, size, ptr);
        }
        return;
    }
    if (ptr == NULL) {
        fuzz_fail("%s(%zu) failed", call, size);
    }
    adopt_block(slot, ptr, size, fundamental_alignment(size), call, new_key());
}

static void do_calloc(int slot, struct input *in)
{
    size_t nmemb = next_byte(in);
    size_t unit = decode_size(in);
    size_t total;
    bool overflows = __builtin_mul_overflow(nmemb, unit, &total);

    if (!overflows && total < IMPOSSIBLE_SIZE &&
        !affordable(total, slots[slot].ptr ? slots[slot].size : 0)) {
        return;
    }
    release_slot(slot, "before calloc");
    errno = 0;
    unsigned char *ptr = hak_calloc(nmemb, unit);
    if (overflows || total >= IMPOSSIBLE_SIZE) {
        expect_enomem(ptr, errno, "hak_calloc(nmemb, size) with nmemb * size", total);
        return;
    }
    if (ptr == NULL) {
        fuzz_fail("hak_calloc(%zu, %zu) failed", nmemb, unit);
    }
    size_t dirty = zero_damage(ptr, total);
    if (dirty != PATTERN_INTACT) {
        fuzz_fail("hak_calloc(%zu, %zu) returned %p with a non-zero byte at offset %zu", nmemb,
                  unit, (void *)ptr, dirty);
    }
    adopt_block(slot, ptr, total, fundamental_alignment(total), "hak_calloc", new_key());
}

/* realloc and reallocarray: the first min(old, new) bytes survive, a
 * failure leaves the block as it was, and realloc(p, 0) frees p. */
static void resize_slot(int slot, size_t nmemb, size_t unit, bool by_array)
{
    struct live_block *block = &slots[slot];
    size_t old_size = block->ptr ? block->size : 0;
    size_t size;
    bool overflows = __builtin_mul_overflow(nmemb, unit, &size);
    bool impossible = overflows || size >= IMPOSSIBLE_SIZE;
    const char *call = by_array ? "hak_reallocarray" : "hak_realloc";

    if (!impossible && !affordable(size, old_size)) {
        return;
    }
    if (block->ptr != NULL) {
        verify_block(block, "before realloc");
    }
    errno = 0;
    unsigned char *ptr =
        by_array ? hak_reallocarray(block->ptr, nmemb, unit) : hak_realloc(block->ptr, size);
    if (impossible) {
        expect_enomem(ptr, errno, call, size);
        if (block->ptr != NULL) {
            verify_block(block, "after a failed realloc");
        }
        return;
    }
    if (size == 0 && block->ptr != NULL) {
        /* glibc frees the block and returns NULL; a new minimum-size block
         * is allowed too. */
        live_bytes -= old_size;
        block->ptr = NULL;
        if (ptr != NULL) {
            adopt_block(slot, ptr, 0, 8, call, new_key());
        }
        return;
    }
    if (ptr == NULL) {
        fuzz_fail("%s(%p, %zu) failed", call, (void *)block->ptr, size);
    }
    size_t kept = old_size < size ? old_size : size;
    size_t bad = pattern_damage(ptr, kept, old_size, block->key);
    if (block->ptr != NULL && bad != PATTERN_INTACT) {
        fuzz_fail("%s(%p, %zu) -> %p lost the old contents at offset %zu of %zu", call,
                  (void *)block->ptr, size, (void *)ptr, bad, kept);
    }
    /* The pattern is positional: under the old key, the kept prefix is
     * already in place. */
    uint64_t key = block->ptr ? block->key : new_key();
    live_bytes -= old_size;
    block->ptr = NULL;
    adopt_block(slot, ptr, size, fundamental_alignment(size), call, key);
}

static void do_posix_memalign(int slot, size_t alignment, size_t size)
{
    bool valid = is_power_of_two(alignment) && alignment % sizeof(void *) == 0;

    if (size < IMPOSSIBLE_SIZE && !affordable(size, slots[slot].ptr ? slots[slot].size : 0)) {
        return;
    }
    release_slot(slot, "before posix_memalign");
    void *out = &out;
    int error = hak_posix_memalign(&out, alignment, size);
    if (!valid || size >= IMPOSSIBLE_SIZE) {
        int expected = valid ? ENOMEM : EINVAL;
        if (error != expected && !(size >= IMPOSSIBLE_SIZE && error == ENOMEM)) {
            fuzz_fail("hak_posix_memalign(align %zu, size %#zx) returned %d, expected %d",
                      alignment, size, error, expected);
        }
        if (out != &out && out != NULL) {
            fuzz_fail("hak_posix_memalign(align %zu, size %#zx) failed but wrote %p", alignment,
                      size, out);
        }
        return;
    }
    if (error != 0 || out == NULL) {
        fuzz_fail("hak_posix_memalign(align %zu, size %zu) returned %d", alignment, size, error);
    }
    adopt_block(slot, out, size, alignment, "hak_posix_memalign", new_key());
}

static size_t next_power_of_two(size_t value)
{
    size_t power = 1;

    while (power < value) {
        power *= 2;
    }
    return power;
}

/* memalign rounds an alignment that is not a power of two up to one, as
 * glibc does; aligned_alloc may do the same or fail with EINVAL. */
static void do_memalign(int slot, size_t alignment, size_t size, bool aligned_alloc_rules)
{
    const char *call = aligned_alloc_rules ? "hak_aligned_alloc" : "hak_memalign";
    bool representable = alignment <= ALIGNMENT_MAX * 2;

    if (size < IMPOSSIBLE_SIZE && !affordable(size, slots[slot].ptr ? slots[slot].size : 0)) {
        return;
    }
    release_slot(slot, "before memalign");
    errno = 0;
    void *ptr =
        aligned_alloc_rules ? hak_aligned_alloc(alignment, size) : hak_memalign(alignment, size);
    int error = errno;
    if (size >= IMPOSSIBLE_SIZE || !representable) {
        if (ptr != NULL || (error != ENOMEM && error != EINVAL)) {
            fuzz_fail("%s(%#zx, %#zx) returned %p with errno %d, expected NULL and ENOMEM or "
                      "EINVAL",
                      call, alignment, size, ptr, error);
        }
        return;
    }
    if (ptr == NULL) {
        if (aligned_alloc_rules && !is_power_of_two(alignment) && error == EINVAL) {
            return;
        }
        fuzz_fail("%s(%zu, %zu) failed with errno %d", call, alignment, size, error);
    }
    size_t promised = next_power_of_two(alignment);
    if (promised < fundamental_alignment(size)) {
        promised = fundamental_alignment(size);
    }
    adopt_block(slot, ptr, size, promised, call, new_key());
}

static void do_page_alloc(int slot, size_t size, bool whole_pages)
{
    const char *call = whole_pages ? "hak_pvalloc" : "hak_valloc";
    size_t promised = whole_pages && size < IMPOSSIBLE_SIZE ? round_up(size, page_size) : size;

    if (size < IMPOSSIBLE_SIZE && !affordable(promised, slots[slot].ptr ? slots[slot].size : 0)) {
        return;
    }
    release_slot(slot, "before valloc");
    errno = 0;
    void *ptr = whole_pages ? hak_pvalloc(size) : hak_valloc(size);
    if (size >= IMPOSSIBLE_SIZE) {
        expect_enomem(ptr, errno, call, size);
        return;
    }
    if (ptr == NULL) {
        fuzz_fail("%s(%zu) failed", call, size);
    }
    /* pvalloc's caller may use every byte of the rounded-up pages. */
    adopt_block(slot, ptr, promised, page_size, call, new_key());
}

/* malloc_usable_size's bytes are the caller's to use: the pattern is
 * extended over all of them. */
static void use_usable_size(int slot)
{
    struct live_block *block = &slots[slot];

    if (hak_malloc_usable_size(NULL) != 0) {
        fuzz_fail("hak_malloc_usable_size(NULL) = %zu", hak_malloc_usable_size(NULL));
    }
    if (block->ptr == NULL) {
        return;
    }
    verify_block(block, "before using the usable size");
    size_t usable = hak_malloc_usable_size(block->ptr);
    if (usable < block->size) {
        fuzz_fail("usable size of %p shrank from at least %zu to %zu", (void *)block->ptr,
                  block->size, usable);
    }
    if (!affordable(usable, block->size)) {
        return;
    }
    check_no_overlap(block->ptr, usable, slot);
    live_bytes += usable - block->size;
    block->size = usable;
    fill_block(block->ptr, usable, block->key);
}

static void remote_free(int slot)
{
    struct live_block *block = &slots[slot];

    if (block->ptr == NULL) {
        return;
    }
    verify_block(block, "before a free in another thread");
    ask_helper(block->ptr, 0);
    live_bytes -= block->size;
    block->ptr = NULL;
}

static void verify_all(void)
{
    hak_free(NULL);
    for (int i = 0; i < SLOTS; i++) {
        if (slots[i].ptr != NULL) {
            verify_block(&slots[i], "in a sweep");
        }
    }
}

static void run_operation(struct input *in)
{
    enum operation op = (enum operation)(next_byte(in) % OPERATION_COUNT);
    int slot = (int)(next_byte(in) % SLOTS);

    switch (op) {
    case OP_MALLOC:
    case OP_MALLOC_AGAIN:
        do_malloc(slot, decode_size(in), false);
        break;
    case OP_CALLOC:
        do_calloc(slot, in);
        break;
    case OP_REALLOC:
        resize_slot(slot, 1, decode_size(in), false);
        break;
    case OP_REALLOCARRAY: {
        size_t nmemb = next_byte(in);
        resize_slot(slot, nmemb, decode_size(in), true);
        break;
    }
    case OP_POSIX_MEMALIGN: {
        size_t alignment = decode_alignment(in);
        do_posix_memalign(slot, alignment, decode_size(in));
        break;
    }
    case OP_ALIGNED_ALLOC:
    case OP_MEMALIGN: {
        size_t alignment = decode_alignment(in);
        do_memalign(slot, alignment, decode_size(in), op == OP_ALIGNED_ALLOC);
        break;
    }
    case OP_VALLOC:
    case OP_PVALLOC:
        do_page_alloc(slot, decode_size(in), op == OP_PVALLOC);
        break;
    case OP_FREE:
    case OP_FREE_AGAIN:
        release_slot(slot, "before free");
        break;
    case OP_USE_USABLE_SIZE:
        use_usable_size(slot);
        break;
    case OP_REMOTE_FREE:
        remote_free(slot);
        break;
    case OP_REMOTE_MALLOC:
        do_malloc(slot, decode_size(in), true);
        break;
    case OP_VERIFY_ALL:
    case OPERATION_COUNT:
        verify_all();
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct input in = {data, size, 0};

    page_size = (size_t)sysconf(_SC_PAGESIZE);
    for (int done = 0; in.pos < in.size && done < MAX_OPERATIONS; done++) {
        run_operation(&in);
    }
    /* Each input starts from an empty table, so that a crash reproduces
     * from its input alone. */
    for (int i = 0; i < SLOTS; i++) {
        release_slot(i, "at the end of the input");
    }
    if (live_bytes != 0) {
        fuzz_fail("bookkeeping error: %zu live bytes after freeing everything", live_bytes);
    }
    return 0;
}
