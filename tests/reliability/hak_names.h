/* Force-included (gcc -include) into test programs that link the sanitizer
 * build of hakmem.  AddressSanitizer owns malloc in those programs, so the
 * standard allocation names in the test sources are renamed to their hak_
 * twins: the tests then exercise hakmem while the C library and the
 * sanitizer runtime keep their own allocator. */
#ifndef HAKMEM_TESTS_HAK_NAMES_H
#define HAKMEM_TESTS_HAK_NAMES_H

#include "hakmem.h"

#define malloc hak_malloc
#define free hak_free
#define free_sized hak_free_sized
#define free_aligned_sized hak_free_aligned_sized
#define calloc hak_calloc
#define realloc hak_realloc
#define reallocarray hak_reallocarray
#define posix_memalign hak_posix_memalign
#define aligned_alloc hak_aligned_alloc
#define memalign hak_memalign
#define valloc hak_valloc
#define pvalloc hak_pvalloc
#define malloc_usable_size hak_malloc_usable_size

#endif
