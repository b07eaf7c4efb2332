/* An mremap for the unit tests, which the allocator's os.c calls instead of
 * the C library's (the tests link its objects): it moves as the kernel does,
 * but refuses a move (MREMAP_FIXED) whose source mremap_refused says so,
 * as Linux before 6.17 refuses one over several of its mappings (after it
 * unmapped the destination), or as Linux before 5.7 refuses
 * MREMAP_DONTUNMAP (mremap_refusal).  It counts the refusals and keeps the sources
 * of the last moves it let through. */
#ifndef HAKMEM_UNIT_REFUSING_MREMAP_H
#define HAKMEM_UNIT_REFUSING_MREMAP_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* NULL: every move as the kernel does it. */
static bool (*mremap_refused)(const void *source, size_t size);
/* How a move is refused: EFAULT as Linux before 6.17 refuses one over
 * several mappings, after it unmapped the destination; EINVAL as Linux
 * before 5.7 refuses MREMAP_DONTUNMAP, before it does anything. */
static int mremap_refusal = EFAULT;

/* Volatile: the compiler takes malloc for a call that writes no memory of
 * the program's, and mremap runs inside it. */
static volatile unsigned mremap_refusals;
#define MREMAP_MOVES_KEPT 16
static void *volatile mremap_moved_from[MREMAP_MOVES_KEPT];
static volatile unsigned mremap_moves;

void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
    void *new_address = NULL;
    if (flags & MREMAP_FIXED) {
        va_list args;
        va_start(args, flags);
        new_address = va_arg(args, void *);
        va_end(args);
        if (mremap_refused && mremap_refused(old_address, old_size)) {
            if (mremap_refusal == EFAULT)
                munmap(new_address, new_size);
            mremap_refusals++;
            errno = mremap_refusal;
            return MAP_FAILED;
        }
    }
    void *result = (void *)syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
    if (result != MAP_FAILED && (flags & MREMAP_FIXED))
        mremap_moved_from[mremap_moves++ % MREMAP_MOVES_KEPT] = old_address;
    return result;
}

/* Whether a move from source was let through since the count was first. */
static inline bool mremap_moved_since(unsigned first, const void *source)
{
    for (unsigned i = first; i < mremap_moves && i < first + MREMAP_MOVES_KEPT; i++)
        if (mremap_moved_from[i % MREMAP_MOVES_KEPT] == source)
            return true;
    return false;
}

#endif
