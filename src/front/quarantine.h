/* Under memcheck, freed blocks wait here, wholly inaccessible to the
 * program, before they go back to their slabs: memcheck then reports a use
 * after free anywhere in a block, its link and tag words included, until
 * QUARANTINE_BLOCKS more frees of the thread have pushed it out.  Only the
 * checked free path (front/thread_heap.c) uses it. */
#ifndef HAK_QUARANTINE_H
#define HAK_QUARANTINE_H

#include "../internal.h"

struct hak_quarantine;

/* NULL when hakmem's metadata has no room. */
struct hak_quarantine *hak_quarantine_create(void);
void hak_quarantine_destroy(struct hak_quarantine *quarantine);
/* Keeps block; returns the oldest block when that makes room for it, else
 * NULL. */
void *hak_quarantine_push(struct hak_quarantine *quarantine, void *block);
/* The oldest block, or NULL when none is left. */
void *hak_quarantine_pop(struct hak_quarantine *quarantine);

#endif
