/* The SuperSlab: a 2 MiB chunk cut into 64 KiB slabs for the small classes. */
#ifndef HAK_SUPERSLAB_H
#define HAK_SUPERSLAB_H

#include "../internal.h"

/* Maps and registers a SuperSlab on node; NULL with errno ENOMEM. */
struct hak_superslab *hak_superslab_create(unsigned node);
void hak_superslab_destroy(struct hak_superslab *ss);

static inline struct hak_superslab *hak_superslab_of(const struct hak_slab *slab)
{
    return (struct hak_superslab *)slab->chunk;
}

static inline unsigned hak_superslab_index(const struct hak_slab *slab)
{
    return (unsigned)(slab - hak_superslab_of(slab)->slabs);
}

#endif
