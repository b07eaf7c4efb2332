/* Slabs whose owner thread exited while some of their blocks were still in
 * use.  A heap that needs a slab of the same class and node adopts one
 * before asking a backend for fresh memory, so memory left by dead threads
 * is reused. */
#ifndef HAK_ABANDONED_H
#define HAK_ABANDONED_H

#include "../internal.h"

/* A list of slabs linked through next, all disowned (hak_slab_disown), in
 * one locked section: a thread leaves all its slabs at once. */
void hak_abandoned_push(struct hak_slab *list);
struct hak_slab *hak_abandoned_pop(unsigned node, unsigned cls);
/* Takes slab off its list for a heap to adopt; false if it is on none (not
 * abandoned, adopted already, or taken by malloc_trim). */
bool hak_abandoned_take(struct hak_slab *slab);
/* Whether node has abandoned slabs of class cls, at a glance (no lock). */
bool hak_abandoned_any(unsigned node, unsigned cls);
/* malloc_trim: takes all of node's abandoned slabs of class cls off their
 * list at once (linked through next); hak_abandoned_restore puts back those
 * still in use.  Neither counts as abandoning or adopting. */
struct hak_slab *hak_abandoned_take_all(unsigned node, unsigned cls);
void hak_abandoned_restore(struct hak_slab *list);

void hak_abandoned_lock(void);
void hak_abandoned_unlock(void);

#endif
