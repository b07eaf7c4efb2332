#include "meta.h"

#include <string.h>

#include "../fork_locks.h"
#include "../os.h"
#include "../stats.h"

#define META_REGION (1u << 20)
#define META_SIZE_CLASSES 8 /* 64 B ... HAK_META_MAX_BYTES */
_Static_assert(HAK_META_MAX_BYTES == HAK_CACHE_LINE << (META_SIZE_CLASSES - 1), "meta classes");

/* Freed records by size class; bump allocation from the current region. */
static struct meta_state {
    void *free[META_SIZE_CLASSES];
    char *bump;
    char *bump_end;
} meta HAK_START_UP;

static unsigned size_class(size_t size)
{
    unsigned cls = 0;
    while (((size_t)HAK_CACHE_LINE << cls) < size)
        cls++;
    return cls;
}

void *hak_meta_alloc(size_t size)
{
    unsigned cls = size_class(size);
    if (cls >= META_SIZE_CLASSES)
        return NULL;
    size_t bytes = (size_t)HAK_CACHE_LINE << cls;
    pthread_mutex_lock(&hak_fork_locks.meta.mutex);
    void *obj = meta.free[cls];
    if (obj) {
        meta.free[cls] = *(void **)obj;
        pthread_mutex_unlock(&hak_fork_locks.meta.mutex);
        memset(obj, 0, bytes);
        return obj;
    }
    if ((size_t)(meta.bump_end - meta.bump) < bytes) {
        char *region = hak_os_map_aligned(META_REGION, HAK_PAGE_SIZE);
        if (!region) {
            pthread_mutex_unlock(&hak_fork_locks.meta.mutex);
            return NULL;
        }
        meta.bump = region;
        meta.bump_end = region + META_REGION;
    }
    obj = meta.bump;
    meta.bump += bytes;
    /* Regions are page-aligned: the record enters the pages up to its end. */
    uintptr_t entered = (((uintptr_t)meta.bump + HAK_PAGE_SIZE - 1) >> HAK_PAGE_SHIFT) -
                        (((uintptr_t)obj + HAK_PAGE_SIZE - 1) >> HAK_PAGE_SHIFT);
    pthread_mutex_unlock(&hak_fork_locks.meta.mutex);
    hak_stat_pages_out(HAK_PAGES_SSM, entered, 0);
    return obj; /* fresh pages read as zeros */
}

void hak_meta_free(void *obj, size_t size)
{
    unsigned cls = size_class(size);
    pthread_mutex_lock(&hak_fork_locks.meta.mutex);
    *(void **)obj = meta.free[cls];
    meta.free[cls] = obj;
    pthread_mutex_unlock(&hak_fork_locks.meta.mutex);
}

struct hak_slab *hak_span_desc_alloc(void)
{
    return hak_meta_alloc(sizeof(struct hak_slab));
}

void hak_span_desc_free(struct hak_slab *desc)
{
    hak_meta_free(desc, sizeof(struct hak_slab));
}

void hak_meta_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.meta.mutex);
}

void hak_meta_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.meta.mutex);
}
