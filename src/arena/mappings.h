/* Pages moved between SuperSlabs and arena chunks one kernel mapping at a
 * time: a range moved in (hak_os_lend) lands as a mapping of its own, and
 * Linux before 6.17 refuses to move a range over several (after it
 * unmapped the destination).  Each container keeps where its mappings may
 * start (struct hak_mappings), so that its pages can move on from there
 * as often as they come in, on any kernel: before, a SuperSlab that took
 * a hot span's pages could not lend them to a span again, nor a chunk
 * whose spans took a spare's pages lend to a SuperSlab, and memory moved
 * from one phase of a program to the next one way only. */
#ifndef HAK_MAPPINGS_H
#define HAK_MAPPINGS_H

#include "../internal.h"
#include "../os.h"

/* The grain of every lend.  Pages that move keep the kernel mapping they
 * came in with, and pages from different mappings never share one again:
 * a range moved in pieces lands in pieces, however often it moves on, and
 * every move, fault and unmap slows with the mappings.  Moved a page or a
 * few at a time (a slab's carved pages, a span's last few), they cut
 * containers that never wholly empty into thousands (README: 6.4k after
 * 60 rounds of bench/phases with no pause, most of 8 KiB); moved in whole
 * slabs but from any page (the tails of 40-200 KiB spans), they were cut
 * finer at every phase all the same (95 a SuperSlab after 80 rounds, 41-83
 * us a move).  So a range moves in whole grains, to a grain line of the
 * address space, and from one too unless it leaves a single mapping (the
 * kernel keeps that one whole): every mapping a move leaves in a SuperSlab
 * or a chunk (both aligned to the grain) starts on a grain line, at most a
 * SuperSlab's 32 or a chunk's 64 however often pages move.  Less than a
 * grain stays where it is, or goes back to the kernel while the
 * destination faults in its own. */
#define HAK_LEND_GRAIN HAK_SLAB_SIZE

static inline uintptr_t hak_lend_grain_down(uintptr_t address)
{
    return address & ~(uintptr_t)(HAK_LEND_GRAIN - 1);
}

static inline uintptr_t hak_lend_grain_up(uintptr_t address)
{
    return hak_lend_grain_down(address + HAK_LEND_GRAIN - 1);
}

/* m's container was mapped anew: one mapping, its ranges forgotten
 * (hak_os_forget_lent).  Nobody lends into it or out of it meanwhile. */
void hak_mappings_map_anew(struct hak_mappings *m);
/* Whether pages may move out of m's container: no move out of it failed
 * since it was mapped, which may have been at a mapping the bits do not
 * know of, and would fail again. */
bool hak_mappings_known(const struct hak_mappings *m);

/* Whether [start, end), page-aligned, of the container at base lies in
 * one of its mappings, as far as m tells: no range moved in starts or ends
 * inside it. */
bool hak_mappings_one(const struct hak_mappings *m, const char *base, const char *start,
                      const char *end);

/* Moves the size bytes at src, in the container at from_base whose
 * mappings from tells, to dst in the one at to_base, dst and size on the
 * grain (HAK_LEND_GRAIN), and src too unless the range lies in one of
 * from's mappings (hak_mappings_one), which the move leaves whole (the
 * kernel keeps the mapping the pages leave): one of from's mappings at a
 * time where the kernel moves over no more (hak_os_moves_over_mappings),
 * src's last ones first, each to dst's first bytes not yet moved to, so
 * that what moved is always a suffix of src and a prefix of dst, *moved
 * bytes long.  *dst_used counts a failed move's bytes too (dst may hold
 * some of its pages, and is bound to node again), src counting them
 * still, and from moves no more pages (hak_mappings_known).  to counts
 * each range and where its mappings start and end.  HAK_LENT when all
 * moved; else the result of the move that stopped it (os.h). */
enum hak_lend_result hak_mappings_lend(struct hak_mappings *from, const char *from_base, char *src,
                                       size_t size, struct hak_mappings *to, const char *to_base,
                                       char *dst, unsigned node, size_t *moved, size_t *dst_used);

#endif
