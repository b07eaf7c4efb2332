/* Slabs whose owner thread exited while some of their blocks were still in
 * use.  A heap that needs a slab of the same class and node adopts one
 * before asking a backend for fresh memory, so memory left by dead threads
 * is reused. */
#ifndef HAK_ABANDONED_H
#define HAK_ABANDONED_H

#include "../internal.h"

/* slab must already be disowned (hak_slab_disown). */
void hak_abandoned_push(struct hak_slab *slab);
struct hak_slab *hak_abandoned_pop(unsigned node, unsigned cls);

void hak_abandoned_lock(void);
void hak_abandoned_unlock(void);

#endif
