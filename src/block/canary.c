#include "canary.h"

#include <string.h>

#include "../fault.h"
#include "../memcheck.h"
#include "block_link.h"

/* The canary's byte at address at: a byte of the key by the address's
 * place in its word, plus a step that differs at every place, so that the
 * eight are never all the same and no run of one byte (a memset, a string
 * of one character) matches them by chance; with one byte for all, a
 * process whose byte was the program's ('A' in the heap-fault suite)
 * missed such an overflow one time in 256.  Never zero: a stray
 * terminating NUL is the commonest overflow. */
static uint8_t canary_byte(const void *at)
{
    unsigned place = (unsigned)((uintptr_t)at % 8);
    uint8_t byte = (uint8_t)((uint8_t)(hak_link_keys.canary >> (8 * place)) + place * 0x55);
    return byte ? byte : 0xa5;
}

/* What the record's size is XORed with: the key, with the top bit set in
 * each of its bytes 3 to 6, above every checked block's size (1 MiB at
 * most), so that in the record's top four bytes, the last of the block,
 * a byte of text (below 0x80, NUL included) written over one of them
 * never matches.  With the key's own bytes there, a process whose byte
 * was the program's missed such a write one time in 256 (the heap-fault
 * suite's write of one 'A' under the next block). */
static uint64_t record_key(void)
{
    return hak_link_keys.canary | 0x0080808080000000u;
}

/* The record, at at: the canary's byte there, then the size XOR the key. */
static uint64_t record_of(const void *at, size_t size)
{
    return (uint64_t)(size ^ record_key()) << 8 | canary_byte(at);
}

/* The canary's eight bytes as they lie in an aligned word. */
static uint64_t canary_word(void)
{
    uint64_t word;
    uint8_t bytes[8];
    for (unsigned place = 0; place < 8; place++)
        bytes[place] = canary_byte((const void *)(uintptr_t)place);
    memcpy(&word, bytes, sizeof(word));
    return word;
}

/* Bytes one at a time up to a word's boundary and after the last, whole
 * words between: a large block's canary may cover megabytes. */
static bool filled(const char *from, const char *to)
{
    for (; from < to && (uintptr_t)from % 8; from++)
        if ((uint8_t)*from != canary_byte(from))
            return false;
    uint64_t pattern = canary_word(), word;
    for (; to - from >= 8; from += 8) {
        memcpy(&word, from, sizeof(word));
        if (word != pattern)
            return false;
    }
    for (; from < to; from++)
        if ((uint8_t)*from != canary_byte(from))
            return false;
    return true;
}

static __attribute__((noreturn, cold)) void overflow(const void *block, const char *note)
{
    hak_fatal_note("heap overflow past block", block, note);
}

void hak_canary_fill(void *block, size_t size, size_t end)
{
    char *from = (char *)block + size;
    hak_memcheck_undefined(from, end - size);
    char *at = from, *to = (char *)block + end;
    for (; at < to && (uintptr_t)at % 8; at++)
        *at = (char)canary_byte(at);
    uint64_t pattern = canary_word();
    for (; to - at >= 8; at += 8)
        memcpy(at, &pattern, sizeof(pattern));
    for (; at < to; at++)
        *at = (char)canary_byte(at);
    hak_memcheck_noaccess(from, end - size);
}

void hak_canary_verify(const void *block, size_t size, size_t end, const char *note)
{
    const char *from = (const char *)block + size;
    hak_memcheck_defined(from, end - size);
    if (!filled(from, (const char *)block + end))
        overflow(block, note);
    hak_memcheck_noaccess(from, end - size);
}

static void write_record(void *block, size_t record, size_t size)
{
    uint64_t word = record_of((char *)block + record, size);
    hak_memcheck_undefined((char *)block + record, sizeof(word));
    memcpy((char *)block + record, &word, sizeof(word));
    hak_memcheck_noaccess((char *)block + record, sizeof(word));
}

/* The size the record holds, or SIZE_MAX when it is not a record of a size
 * that fits before it. */
static size_t decode_record(const void *block, size_t record)
{
    uint64_t word;
    hak_memcheck_defined((const char *)block + record, sizeof(word));
    memcpy(&word, (const char *)block + record, sizeof(word));
    hak_memcheck_noaccess((const char *)block + record, sizeof(word));
    size_t size = (size_t)((word >> 8) ^ (record_key() & (UINT64_MAX >> 8)));
    return (uint8_t)word == canary_byte((const char *)block + record) && size <= record ? size
                                                                                        : SIZE_MAX;
}

static size_t read_record(const void *block, size_t record, const char *note)
{
    size_t size = decode_record(block, record);
    if (size == SIZE_MAX)
        overflow(block, note);
    return size;
}

void hak_canary_set(void *block, size_t block_size, size_t size)
{
    size_t record = block_size - HAK_CANARY_BYTES;
    hak_canary_fill(block, size, record);
    write_record(block, record, size);
}

size_t hak_canary_check(const void *block, size_t block_size, const char *note)
{
    size_t record = block_size - HAK_CANARY_BYTES;
    size_t size = read_record(block, record, note);
    hak_canary_verify(block, size, record, note);
    return size;
}

bool hak_canary_intact(const void *block, size_t block_size)
{
    size_t record = block_size - HAK_CANARY_BYTES;
    size_t size = decode_record(block, record);
    return size != SIZE_MAX && filled((const char *)block + size, (const char *)block + record);
}

size_t hak_canary_resize(void *block, size_t block_size, size_t size, const char *note)
{
    size_t record = block_size - HAK_CANARY_BYTES;
    size_t old = read_record(block, record, note);
    if (size > old)
        hak_canary_verify(block, old, size, note);
    else
        hak_canary_fill(block, size, old);
    write_record(block, record, size);
    return old;
}
