#include "canary.h"

#include <string.h>

#include "../fault.h"
#include "../memcheck.h"
#include "block_link.h"

/* Never zero: a stray terminating NUL is the commonest overflow. */
static uint8_t fill_byte(void)
{
    uint8_t byte = (uint8_t)(hak_link_keys.canary >> 32);
    return byte ? byte : 0xa5;
}

/* The record: the fill byte, then the size XOR the key. */
static uint64_t record_of(size_t size)
{
    return (uint64_t)(size ^ hak_link_keys.canary) << 8 | fill_byte();
}

static bool filled(const char *from, const char *to)
{
    uint8_t byte = fill_byte();
    for (; from < to; from++)
        if ((uint8_t)*from != byte)
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
    memset(from, fill_byte(), end - size);
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
    uint64_t word = record_of(size);
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
    size_t size = (size_t)((word >> 8) ^ (hak_link_keys.canary & (UINT64_MAX >> 8)));
    return (uint8_t)word == fill_byte() && size <= record ? size : SIZE_MAX;
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
