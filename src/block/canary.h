/* Canaries of the checked mode (harden.h).  A block records the size it was
 * asked with in its last word, and the bytes from that size up to the record
 * hold a per-process pattern, a byte for each place in a word, none zero, as
 * does the record's first byte: a write past the requested size, even of one
 * zero byte, changes one of them, and the free that finds the change aborts
 * naming the block. */
#ifndef HAK_CANARY_H
#define HAK_CANARY_H

#include "../internal.h"

/* Room a block needs past its requested size, for the record. */
#define HAK_CANARY_BYTES 8

/* block_size: a multiple of 8, at least size + HAK_CANARY_BYTES. */
void hak_canary_set(void *block, size_t block_size, size_t size);
/* The size hak_canary_set recorded; aborts with "heap overflow past block
 * ADDR (note)" when anything past it changed. */
size_t hak_canary_check(const void *block, size_t block_size, const char *note);
/* The same test, false instead of an abort: for a block another thread
 * may be freeing. */
bool hak_canary_intact(const void *block, size_t block_size);

/* The block takes size bytes (size + HAK_CANARY_BYTES <= block_size) and
 * returns the size it had: only the bytes it gains are checked, only those
 * it gives up filled, so that a run of small resizes costs what they move
 * (the rest of the canary waits for the free's check). */
size_t hak_canary_resize(void *block, size_t block_size, size_t size, const char *note);

/* The same for a block whose size is kept elsewhere (a large block's head):
 * only [block + size, block + end) is filled and checked. */
void hak_canary_fill(void *block, size_t size, size_t end);
void hak_canary_verify(const void *block, size_t size, size_t end, const char *note);

#endif
