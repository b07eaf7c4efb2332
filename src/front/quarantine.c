#include "quarantine.h"

#include "../arena/meta.h"

/* With its two counters the quarantine fills one 4 KiB metadata record. */
#define QUARANTINE_BLOCKS 511

struct hak_quarantine {
    uint32_t oldest;
    uint32_t count;
    void *blocks[QUARANTINE_BLOCKS];
};

_Static_assert(sizeof(struct hak_quarantine) == 4096, "one page of metadata");

struct hak_quarantine *hak_quarantine_create(void)
{
    return hak_meta_alloc(sizeof(struct hak_quarantine));
}

void hak_quarantine_destroy(struct hak_quarantine *quarantine)
{
    hak_meta_free(quarantine, sizeof(struct hak_quarantine));
}

void *hak_quarantine_push(struct hak_quarantine *quarantine, void *block)
{
    void *out = NULL;
    if (quarantine->count == QUARANTINE_BLOCKS)
        out = hak_quarantine_pop(quarantine);
    quarantine->blocks[(quarantine->oldest + quarantine->count) % QUARANTINE_BLOCKS] = block;
    quarantine->count++;
    return out;
}

void *hak_quarantine_pop(struct hak_quarantine *quarantine)
{
    if (!quarantine->count)
        return NULL;
    void *block = quarantine->blocks[quarantine->oldest];
    quarantine->oldest = (quarantine->oldest + 1) % QUARANTINE_BLOCKS;
    quarantine->count--;
    return block;
}
