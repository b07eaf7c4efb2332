/* The one door to the kernel for memory: mapping, decommitting, binding. */
#ifndef HAK_OS_H
#define HAK_OS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Anonymous read-write memory aligned to align (a power of two, at least a
 * page), or NULL with errno ENOMEM. */
void *hak_os_map_aligned(size_t size, size_t align);
void hak_os_unmap(void *addr, size_t size);
/* Gives the pages back; the range stays mapped and reads as zeros. */
void hak_os_decommit(void *addr, size_t size);
/* Places the range on NUMA node node (before first touch); a no-op where
 * the kernel has no NUMA support. */
void hak_os_bind(void *addr, size_t size, unsigned node);
/* Extends a mapping where the address space after it is free; false when
 * it is not. */
bool hak_os_grow_in_place(void *addr, size_t old_size, size_t new_size);
/* Whether the page at addr is mapped at all. */
bool hak_os_page_mapped(const void *addr);
uint64_t hak_os_now_ms(void);
void hak_os_write(int fd, const char *buf, size_t len);

#endif
