#include "abandoned.h"

#include "../fork_locks.h"
#include "../stats.h"

static struct {
    struct hak_slab *lists[HAK_MAX_NODES][HAK_NUM_CLASSES];
} abandoned;

/* Under the lock.  A slab is HAK_STATE_ABANDONED exactly while it is on a
 * list, linked both ways, so that hak_abandoned_take can take it out. */
static void link_slab(struct hak_slab *slab)
{
    struct hak_slab *head = abandoned.lists[slab->node][slab->cls];
    slab->state = HAK_STATE_ABANDONED;
    slab->prev = NULL;
    slab->next = head;
    if (head)
        head->prev = slab;
    __atomic_store_n(&abandoned.lists[slab->node][slab->cls], slab, __ATOMIC_RELEASE);
}

/* Under the lock: slab leaves its list, to be adopted. */
static void unlink_slab(struct hak_slab *slab)
{
    struct hak_slab *next = slab->next;
    if (slab->prev)
        slab->prev->next = next;
    else
        __atomic_store_n(&abandoned.lists[slab->node][slab->cls], next, __ATOMIC_RELAXED);
    if (next)
        next->prev = slab->prev;
    slab->next = slab->prev = NULL;
    slab->state = HAK_STATE_NONE;
    hak_stat_add(HAK_STAT_ADOPTED_SLABS, 1);
}

void hak_abandoned_push(struct hak_slab *list)
{
    if (!list)
        return;
    uint64_t count = 0;
    for (struct hak_slab *slab = list; slab; slab = slab->next)
        count++;
    hak_abandoned_restore(list);
    hak_stat_add(HAK_STAT_ABANDONED_SLABS, count);
}

struct hak_slab *hak_abandoned_pop(unsigned node, unsigned cls)
{
    struct hak_slab **list = &abandoned.lists[node][cls];
    if (!__atomic_load_n(list, __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(&hak_fork_locks.abandoned.mutex);
    struct hak_slab *slab = *list;
    if (slab)
        unlink_slab(slab);
    pthread_mutex_unlock(&hak_fork_locks.abandoned.mutex);
    return slab;
}

bool hak_abandoned_take(struct hak_slab *slab)
{
    pthread_mutex_lock(&hak_fork_locks.abandoned.mutex);
    bool listed = slab->state == HAK_STATE_ABANDONED;
    if (listed)
        unlink_slab(slab);
    pthread_mutex_unlock(&hak_fork_locks.abandoned.mutex);
    return listed;
}

bool hak_abandoned_any(unsigned node, unsigned cls)
{
    return __atomic_load_n(&abandoned.lists[node][cls], __ATOMIC_RELAXED) != NULL;
}

struct hak_slab *hak_abandoned_take_all(unsigned node, unsigned cls)
{
    struct hak_slab **list = &abandoned.lists[node][cls];
    if (!__atomic_load_n(list, __ATOMIC_RELAXED))
        return NULL;
    pthread_mutex_lock(&hak_fork_locks.abandoned.mutex);
    struct hak_slab *all = *list;
    __atomic_store_n(list, NULL, __ATOMIC_RELAXED);
    for (struct hak_slab *slab = all; slab; slab = slab->next)
        slab->state = HAK_STATE_NONE; /* off the list: hak_abandoned_take leaves it */
    pthread_mutex_unlock(&hak_fork_locks.abandoned.mutex);
    return all;
}

void hak_abandoned_restore(struct hak_slab *list)
{
    if (!list)
        return;
    pthread_mutex_lock(&hak_fork_locks.abandoned.mutex);
    while (list) {
        struct hak_slab *next = list->next;
        link_slab(list);
        list = next;
    }
    pthread_mutex_unlock(&hak_fork_locks.abandoned.mutex);
}

void hak_abandoned_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.abandoned.mutex);
}

void hak_abandoned_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.abandoned.mutex);
}
