#include "os.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "stats.h"

#define NODEMASK_WORDS (HAK_MAX_NODES / (8 * sizeof(long)))

void *hak_os_map_aligned(size_t size, size_t align)
{
    size_t span = size + align - 4096;
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    char *raw = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                     -1, 0);
    if (raw == MAP_FAILED) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t start = ((uintptr_t)raw + align - 1) & ~(uintptr_t)(align - 1);
    size_t head = start - (uintptr_t)raw;
    size_t tail = span - head - size;
    if (head)
        munmap(raw, head);
    if (tail)
        munmap((char *)start + size, tail);
    hak_stat_add(HAK_STAT_MAPPED_BYTES, size);
    return (void *)start;
}

void hak_os_unmap(void *addr, size_t size)
{
    munmap(addr, size);
    hak_stat_add(HAK_STAT_UNMAPPED_BYTES, size);
}

void hak_os_decommit(void *addr, size_t size)
{
    madvise(addr, size, MADV_DONTNEED);
    hak_stat_add(HAK_STAT_DECOMMITTED_BYTES, size);
}

void hak_os_bind(void *addr, size_t size, unsigned node)
{
    /* MPOL_PREFERRED: stay correct when the node runs out of memory. */
    enum { MPOL_PREFERRED_MODE = 1 };
    unsigned long mask[NODEMASK_WORDS] = {0};
    mask[node / (8 * sizeof(long))] = 1UL << (node % (8 * sizeof(long)));
    syscall(SYS_mbind, addr, size, MPOL_PREFERRED_MODE, mask, NODEMASK_WORDS * 8 * sizeof(long) + 1,
            0);
}

bool hak_os_grow_in_place(void *addr, size_t old_size, size_t new_size)
{
    if (mremap(addr, old_size, new_size, 0) == MAP_FAILED)
        return false;
    hak_stat_add(HAK_STAT_MAPPED_BYTES, new_size - old_size);
    return true;
}

bool hak_os_page_mapped(const void *addr)
{
    unsigned char resident;
    return mincore((void *)addr, HAK_PAGE_SIZE, &resident) == 0;
}

uint64_t hak_os_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void hak_os_write(int fd, const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        buf += n;
        len -= (size_t)n;
    }
}
