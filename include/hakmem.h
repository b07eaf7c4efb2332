/* hakmem — a NUMA-aware malloc replacement.
 *
 * Linking or preloading libhakmem replaces the standard allocation
 * functions.  The hak_-prefixed twins below call the same allocator and let a
 * program use hakmem side by side with another malloc (link with
 * -lhakmem and do not interpose).
 */
#ifndef HAKMEM_H
#define HAKMEM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HAKMEM_VERSION_MAJOR 0
#define HAKMEM_VERSION_MINOR 1

void *hak_malloc(size_t size);
void hak_free(void *ptr);
void hak_free_sized(void *ptr, size_t size);
void hak_free_aligned_sized(void *ptr, size_t alignment, size_t size);
void *hak_calloc(size_t nmemb, size_t size);
void *hak_realloc(void *ptr, size_t size);
void *hak_reallocarray(void *ptr, size_t nmemb, size_t size);
int hak_posix_memalign(void **out, size_t alignment, size_t size);
void *hak_aligned_alloc(size_t alignment, size_t size);
void *hak_memalign(size_t alignment, size_t size);
void *hak_valloc(size_t size);
void *hak_pvalloc(size_t size);
size_t hak_malloc_usable_size(void *ptr);

/* NUMA placement.  hak_malloc_onnode returns a block whose memory is on OS
 * node node (as numactl numbers them), whichever thread asks, or NULL with
 * errno EINVAL for a node hakmem does not use.  Free it with free().
 * hak_node_of returns the node hakmem placed a block on, or -1 for a
 * pointer hakmem does not own. */
void *hak_malloc_onnode(size_t size, int node);
int hak_node_of(const void *ptr);

/* Writes the statistics that HAKMEM_STATS=1 prints at exit to file
 * descriptor fd, now. */
void hak_stats_print(int fd);
/* The same as one JSON object on one line (HAKMEM_STATS=json). */
void hak_stats_print_json(int fd);

#ifdef __cplusplus
}
#endif

#endif
