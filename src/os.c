#include "os.h"

#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <linux/mempolicy.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#if HAVE_DECL___LIBC_SINGLE_THREADED
#include <sys/single_threaded.h>
#endif
#include <time.h>
#include <unistd.h>

#include "fault.h"
#include "fork_locks.h"
#include "internal.h"
#include "print.h"
#include "stats.h"

/* Where the next aligned mapping is asked to end: at the start of the last
 * one made, where the kernel, which hands out addresses from the top down,
 * has most often left room below, so that one mmap makes it; or at the end
 * of a range of 2 MiB or more unmapped since, above that, so that its hole
 * is filled first rather than every new mapping lying lower than the last
 * (a program churning through large blocks would walk down the address
 * space, and the page map's tables with it).  A mapping that had to be cut
 * to its alignment from one as much bigger took an mmap and one or two
 * munmaps, each holding the mmap lock for writing, while the other
 * threads' page faults in the mappings they merge with wait for it (l25,
 * two threads faulting in their first chunks: 6-9 ms of its 20 ms asleep
 * on the lock).  Any thread updates it; a stale hint only costs a try. */
static _Atomic uintptr_t aligned_hint HAK_START_UP;

/* Writable memory is mapped for the kernel to account (no MAP_NORESERVE):
 * under its default overcommit policy it then refuses one mapping bigger
 * than memory and swap (Linux 5.2 on; before, than what is free), so that
 * malloc of such a size fails with ENOMEM as glibc's does, where it
 * succeeded, paid a page-map entry per 2 MiB (malloc(16 TiB): 35 ms and
 * 64 MB) and was sure to be killed at its touches past memory.
 * MAP_NORESERVE changed nothing else: strict accounting
 * (vm.overcommit_memory=2) ignores it, and PROT_NONE reservations are not
 * accounted. */
#define MAP_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS)

/* A mapping of size at addr, or NULL when that range is not free (errno
 * EEXIST); kernels before 4.17 take the flag for a hint, and a mapping
 * elsewhere is the same refusal.  flags: more of them (MAP_NORESERVE). */
static void *map_exactly_at(uintptr_t addr, size_t size, int prot, int flags)
{
    void *got = mmap((void *)addr, size, prot, MAP_FLAGS | MAP_FIXED_NOREPLACE | flags, -1, 0);
    if (got == MAP_FAILED)
        return NULL;
    if ((uintptr_t)got != addr) {
        munmap(got, size);
        errno = EEXIST;
        return NULL;
    }
    return got;
}

static void *map_aligned(size_t size, size_t align, int prot)
{
    uintptr_t below = atomic_load_explicit(&aligned_hint, memory_order_relaxed);
    /* Never at address 0, where mmap_min_addr allows a mapping. */
    if (align > HAK_PAGE_SIZE && below > size && below - size >= align) {
        int saved = errno; /* a hint taken is no error of the caller's */
        char *start = map_exactly_at((below - size) & ~(uintptr_t)(align - 1), size, prot, 0);
        if (start) {
            atomic_store_explicit(&aligned_hint, (uintptr_t)start, memory_order_relaxed);
            return start;
        }
        errno = saved;
    }
    size_t span = size + align - HAK_PAGE_SIZE;
    if (span < size) {
        errno = ENOMEM;
        return NULL;
    }
    int saved = errno; /* a refusal retried below is no error of the caller's */
    char *raw = mmap(NULL, span, prot, MAP_FLAGS, -1, 0);
    /* The kernel accounts the whole span, and may refuse it where it would
     * not what is kept (64 bytes aligned to 16 GiB map 32 GiB on the way):
     * then mapped inaccessible, which it does not account, and what is kept
     * made writable after, which it accounts. */
    bool protect_kept = raw == MAP_FAILED && prot != PROT_NONE && span != size;
    if (protect_kept)
        raw = mmap(NULL, span, PROT_NONE, MAP_FLAGS, -1, 0);
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
    if (protect_kept && mprotect((void *)start, size, prot) != 0) {
        munmap((void *)start, size);
        errno = ENOMEM;
        return NULL;
    }
    errno = saved;
    if (align > HAK_PAGE_SIZE)
        atomic_store_explicit(&aligned_hint, start, memory_order_relaxed);
    return (void *)start;
}

/* The one reservation (hak_os_reserve), in parts of part_size bytes, each
 * cut in two zones, its first head_size bytes and the rest; of each zone
 * how much, from its start, is still reserved and how much has been made
 * memory.  Under hak_fork_locks.os_reservation. */
enum { HEAD_ZONE, REST_ZONE, ZONES };
static struct {
    char *base;
    size_t part_size;
    size_t head_size;
    unsigned parts;
    size_t reserved[HAK_MAX_NODES][ZONES];
    size_t mapped[HAK_MAX_NODES][ZONES];
} reservation HAK_START_UP;

static char *zone_start(unsigned part, unsigned zone)
{
    return reservation.base + part * reservation.part_size +
           (zone == REST_ZONE ? reservation.head_size : 0);
}

/* Whether the process's address space exceeds limit bytes.  A limit set
 * below what the process has is a budget for what it uses; one set as what
 * it has plus some is not exceeded: the reservation was part of what it
 * had, as glibc's arenas are. */
static bool over_address_space(uint64_t limit)
{
    char statm[64];
    size_t len = hak_os_read_file("/proc/self/statm", statm, sizeof(statm) - 1);
    if (len == 0)
        return true; /* no /proc: giving back is always safe */
    size_t pages = 0;
    for (size_t i = 0; i < len && statm[i] >= '0' && statm[i] <= '9'; i++)
        pages = pages * 10 + (size_t)(statm[i] - '0');
    return pages * HAK_PAGE_SIZE > limit;
}

/* Under the lock: over limit, what of each zone was never made memory
 * goes back; true if there was some. */
static bool release_unused_locked(uint64_t limit)
{
    bool unused = false;
    for (unsigned p = 0; p < reservation.parts; p++)
        for (unsigned z = 0; z < ZONES; z++)
            unused |= reservation.reserved[p][z] > reservation.mapped[p][z];
    if (!unused || !over_address_space(limit))
        return false;
    for (unsigned p = 0; p < reservation.parts; p++) {
        for (unsigned z = 0; z < ZONES; z++) {
            size_t mapped = reservation.mapped[p][z];
            if (reservation.reserved[p][z] > mapped)
                munmap(zone_start(p, z) + mapped, reservation.reserved[p][z] - mapped);
            reservation.reserved[p][z] = mapped;
        }
    }
    return true;
}

static uint64_t address_space_limit(void)
{
    struct rlimit limit;
    return getrlimit(RLIMIT_AS, &limit) == 0 ? limit.rlim_cur : RLIM_INFINITY;
}

bool hak_os_release_reservation_over_limit(void)
{
    uint64_t limit = address_space_limit();
    if (limit == RLIM_INFINITY)
        return false;
    hak_os_reservation_lock();
    bool released = release_unused_locked(limit);
    hak_os_reservation_unlock();
    return released;
}

static void *map_memory(size_t size, size_t align)
{
    void *start = map_aligned(size, align, PROT_READ | PROT_WRITE);
    if (!start && hak_os_release_reservation_over_limit())
        start = map_aligned(size, align, PROT_READ | PROT_WRITE);
    return start;
}

void *hak_os_map_aligned(size_t size, size_t align)
{
    void *start = map_memory(size, align);
    if (start)
        hak_stat_add(HAK_STAT_MAPPED_BYTES, size);
    return start;
}

void *hak_os_reserve(size_t head_size, size_t part_size, unsigned parts, size_t align)
{
    size_t size;
    if (!part_size || head_size >= part_size || (head_size | part_size) % HAK_PAGE_SIZE || !parts ||
        parts > HAK_MAX_NODES || __builtin_mul_overflow(part_size, parts, &size) ||
        address_space_limit() != RLIM_INFINITY)
        return NULL;
    hak_os_reservation_lock();
    char *base = reservation.base ? NULL : map_aligned(size, align, PROT_NONE);
    if (base) {
        reservation.base = base;
        reservation.part_size = part_size;
        reservation.head_size = head_size;
        reservation.parts = parts;
        for (unsigned p = 0; p < parts; p++) {
            reservation.reserved[p][HEAD_ZONE] = head_size;
            reservation.reserved[p][REST_ZONE] = part_size - head_size;
        }
    }
    hak_os_reservation_unlock();
    return base;
}

/* Under the lock: whether [start, start + size) lies in the reserved bytes
 * of one zone, *part's *zone, and where it ends there, in *end. */
static bool reserved_zone(const char *start, size_t size, unsigned *part, unsigned *zone,
                          size_t *end)
{
    if (!reservation.base || start < reservation.base)
        return false;
    size_t offset = (size_t)(start - reservation.base);
    size_t in_part = offset % reservation.part_size;
    if (offset / reservation.part_size >= reservation.parts)
        return false;
    *part = (unsigned)(offset / reservation.part_size);
    *zone = in_part < reservation.head_size ? HEAD_ZONE : REST_ZONE;
    *end = (size_t)(start + size - zone_start(*part, *zone));
    return *end <= reservation.reserved[*part][*zone];
}

bool hak_os_map_reserved(void *addr, size_t size)
{
    char *start = addr;
    hak_os_reservation_lock();
    /* Under a limit the program set since, memory comes from mappings the
     * kernel counts against it, not from the reservation. */
    uint64_t limit = address_space_limit();
    bool limited = limit != RLIM_INFINITY;
    if (limited)
        release_unused_locked(limit);
    unsigned part, zone;
    size_t end = 0;
    bool mapped = !limited && reserved_zone(start, size, &part, &zone, &end) &&
                  mprotect(start, size, PROT_READ | PROT_WRITE) == 0;
    if (mapped && end > reservation.mapped[part][zone])
        reservation.mapped[part][zone] = end;
    hak_os_reservation_unlock();
    if (mapped)
        hak_stat_add(HAK_STAT_MAPPED_BYTES, size);
    return mapped;
}

void hak_os_unmap_reserved(void *addr, size_t size)
{
    madvise(addr, size, MADV_DONTNEED);
    mprotect(addr, size, PROT_NONE);
    hak_os_reservation_lock();
    unsigned part, zone;
    size_t end;
    /* The zone's last memory: the rest of it is never made memory now. */
    if (reserved_zone(addr, size, &part, &zone, &end) && end == reservation.mapped[part][zone])
        reservation.mapped[part][zone] = end - size;
    hak_os_reservation_unlock();
    hak_stat_add(HAK_STAT_UNMAPPED_BYTES, size);
}

void hak_os_reservation_lock(void)
{
    pthread_mutex_lock(&hak_fork_locks.os_reservation.mutex);
}

void hak_os_reservation_unlock(void)
{
    pthread_mutex_unlock(&hak_fork_locks.os_reservation.mutex);
}

size_t hak_os_memory_bytes(void)
{
    struct sysinfo info;
    if (sysinfo(&info) != 0)
        return 0;
    return (size_t)info.totalram * info.mem_unit;
}

bool hak_os_could_map(size_t size)
{
    struct rlimit data;
    if (size > address_space_limit() || (getrlimit(RLIMIT_DATA, &data) == 0 &&
                                         data.rlim_cur != RLIM_INFINITY && size > data.rlim_cur))
        return false;
    struct sysinfo info;
    return sysinfo(&info) != 0 || size / info.mem_unit <= (uint64_t)info.totalram + info.totalswap;
}

void hak_os_unmap(void *addr, size_t size)
{
    int saved = errno; /* free() leaves errno alone */
    /* Unmapping part of a mapping splits it, which the kernel refuses where
     * the process has vm.max_map_count mappings: the range stays mapped,
     * out of hakmem's hands (and no unmapped bytes to count, no hint past
     * it), and its pages at least go back. */
    bool unmapped = munmap(addr, size) == 0;
    if (!unmapped)
        madvise(addr, size, MADV_DONTNEED);
    errno = saved;
    if (!unmapped)
        return;
    hak_stat_add(HAK_STAT_UNMAPPED_BYTES, size);
    uintptr_t end = (uintptr_t)addr + size;
    if (size >= HAK_CHUNK_SIZE && end > atomic_load_explicit(&aligned_hint, memory_order_relaxed))
        atomic_store_explicit(&aligned_hint, end, memory_order_relaxed);
}

bool hak_os_address_space_limited(void)
{
    return address_space_limit() != RLIM_INFINITY;
}

void hak_os_advise_huge(void *addr, size_t size)
{
    madvise(addr, size, MADV_HUGEPAGE);
}

/* The least of a few: one write may wait for an interrupt or another task,
 * never run faster than a fault does. */
#define FAULT_PROBE_PAGES 8

uint64_t hak_os_small_page_fault_ns(void)
{
    size_t size = FAULT_PROBE_PAGES * HAK_PAGE_SIZE;
    char *probe = map_memory(size, HAK_PAGE_SIZE);
    if (!probe)
        return 0;
    /* Nor merged into a neighbour that huge pages could back. */
    madvise(probe, size, MADV_NOHUGEPAGE);
    uint64_t least = UINT64_MAX, clock_cost = UINT64_MAX;
    for (size_t page = 0; page < FAULT_PROBE_PAGES; page++) {
        uint64_t start = hak_os_now_ns();
        *(volatile char *)(probe + page * HAK_PAGE_SIZE) = 1;
        uint64_t took = hak_os_now_ns() - start;
        if (took < least)
            least = took;
        /* Where the clock is a system call, not the vDSO's, it costs
         * microseconds itself. */
        start = hak_os_now_ns();
        took = hak_os_now_ns() - start;
        if (took < clock_cost)
            clock_cost = took;
    }
    munmap(probe, size);
    return least > clock_cost ? least - clock_cost : 0;
}

bool hak_os_resident_pages(void *addr, size_t size, size_t *resident)
{
    unsigned char vec[1024];
    size_t pages = size / HAK_PAGE_SIZE;
    *resident = 0;
    for (size_t done = 0; done < pages;) {
        size_t batch = pages - done < sizeof(vec) ? pages - done : sizeof(vec);
        if (mincore((char *)addr + done * HAK_PAGE_SIZE, batch * HAK_PAGE_SIZE, vec))
            return false;
        for (size_t i = 0; i < batch; i++)
            *resident += vec[i] & 1;
        done += batch;
    }
    return true;
}

bool hak_os_mostly_resident(void *addr, size_t size)
{
    size_t resident;
    return hak_os_resident_pages(addr, size, &resident) && resident * 2 >= size / HAK_PAGE_SIZE;
}

bool hak_os_decommit(void *addr, size_t size)
{
    struct iovec range = {addr, size};
    return hak_os_decommit_ranges(&range, 1) == size;
}

/* The calling process as a pidfd (PIDFD_SELF_THREAD_GROUP, Linux 6.15). */
#define SELF_PIDFD (-10001)

/* Set once the kernel refused process_madvise: it predates SELF_PIDFD,
 * MADV_DONTNEED there (6.13) or the call itself. */
static atomic_bool batch_refused;

/* One process_madvise call flushes the TLBs of the CPUs that run the
 * process once for all the ranges, where a madvise per range interrupts
 * every one of them each time: 64 scattered 40 KiB spans took 150 us
 * instead of 7.5 ms with a second thread running (a 2-CPU guest, whose
 * interrupts between CPUs are slow).  A kernel that refuses, or stops
 * short, gets a madvise per range (again: MADV_DONTNEED twice is harmless). */
size_t hak_os_decommit_ranges(const struct iovec *ranges, size_t count)
{
    size_t total = 0;
    for (size_t i = 0; i < count; i++)
        total += ranges[i].iov_len;
    long done = -1;
#ifdef SYS_process_madvise
    if (count > 1 && count <= IOV_MAX &&
        !atomic_load_explicit(&batch_refused, memory_order_relaxed)) {
        int saved = errno; /* free() leaves errno alone */
        done = syscall(SYS_process_madvise, SELF_PIDFD, ranges, count, MADV_DONTNEED, 0);
        if (done < 0 && errno != EINTR && errno != EAGAIN && errno != ENOMEM)
            atomic_store_explicit(&batch_refused, true, memory_order_relaxed);
        errno = saved;
    }
#endif
    size_t given = total;
    if (done < 0 || (size_t)done != total) {
        int saved = errno; /* a refusal (locked pages) inside free() */
        given = 0;
        for (size_t i = 0; i < count; i++)
            if (madvise(ranges[i].iov_base, ranges[i].iov_len, MADV_DONTNEED) == 0)
                given += ranges[i].iov_len;
        errno = saved;
    }
    if (given)
        hak_stat_add(HAK_STAT_DECOMMITTED_BYTES, given);
    return given;
}

void hak_os_guard(void *addr, size_t size)
{
    if (mprotect(addr, size, PROT_NONE))
        hak_fatal("cannot make a guard page (vm.max_map_count?) at", addr);
}

void hak_os_unguard(void *addr, size_t size)
{
    if (mprotect(addr, size, PROT_READ | PROT_WRITE))
        hak_fatal("cannot remove a guard page at", addr);
}

void hak_os_mbind(void *addr, size_t size, enum hak_os_mpol mode, const unsigned long *mask)
{
    syscall(SYS_mbind, addr, size, (int)mode, mask, (unsigned long)HAK_OS_MAX_NODES + 1, 0);
}

bool hak_os_bind_policy_nodes(unsigned long mask[HAK_OS_NODEMASK_WORDS])
{
    /* get_mempolicy wants room for every node the kernel could have. */
    enum { POLICY_BITS = 4096 };
    unsigned long policy[POLICY_BITS / (8 * sizeof(unsigned long))];
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, policy, (unsigned long)POLICY_BITS, NULL, 0) != 0 ||
        (mode & ~MPOL_MODE_FLAGS) != MPOL_BIND)
        return false;
    memcpy(mask, policy, HAK_OS_NODEMASK_WORDS * sizeof(unsigned long));
    return true;
}

bool hak_os_allowed_memory_nodes(unsigned long mask[HAK_OS_NODEMASK_WORDS])
{
    enum { POLICY_BITS = 4096 };
    unsigned long allowed[POLICY_BITS / (8 * sizeof(unsigned long))];
    int mode;
    if (syscall(SYS_get_mempolicy, &mode, allowed, (unsigned long)POLICY_BITS, NULL,
                MPOL_F_MEMS_ALLOWED) != 0)
        return false;
    memcpy(mask, allowed, HAK_OS_NODEMASK_WORDS * sizeof(unsigned long));
    return true;
}

size_t hak_os_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t len = 0;
    while (len < size) {
        ssize_t n = read(fd, buf + len, size - len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    return len;
}

const char *hak_os_status_field(const char *path, const char *key, char *buf, size_t size)
{
    size_t len = hak_os_read_file(path, buf, size - 1);
    buf[len] = '\0';
    size_t key_len = strlen(key);
    for (char *line = buf; line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, key_len) != 0)
            continue;
        char *value = line + key_len;
        while (*value == ' ' || *value == '\t')
            value++;
        char *end = strchr(value, '\n');
        if (!end && len == size - 1)
            return NULL; /* cut off */
        if (end)
            *end = '\0';
        return value;
    }
    return NULL;
}

/* The balloon reports only free blocks of a huge page or more, which the
 * host then unmaps: the guest's next huge page likely lies in one, and its
 * first touch faults in the host as well.  Devices are numbered from 0; a
 * few missing numbers in a row (unplugged ones) end the list. */
#define VIRTIO_ID_BALLOON "0x0005"
#define VIRTIO_BALLOON_F_REPORTING 5
#define VIRTIO_DEVICES_MAX 64
#define VIRTIO_MISSING_MAX 4

static const char *virtio_path(struct hak_printer *path, const char *root, unsigned device,
                               const char *file)
{
    path->len = 0;
    hak_print_str(path, root);
    hak_print_str(path, "/sys/bus/virtio/devices/virtio");
    hak_print_u64(path, device, 0);
    hak_print_str(path, file);
    return hak_print_terminated(path);
}

bool hak_os_free_memory_reported(const char *root)
{
    /* Static: this runs inside malloc, on whatever stack the thread has. */
    static struct hak_printer path = {.fd = -1};
    static char text[160];
    unsigned missing = 0;
    for (unsigned device = 0; device < VIRTIO_DEVICES_MAX && missing < VIRTIO_MISSING_MAX;
         device++) {
        size_t len =
            hak_os_read_file(virtio_path(&path, root, device, "/device"), text, sizeof(text));
        if (len == 0) {
            missing++;
            continue;
        }
        missing = 0;
        if (len < sizeof(VIRTIO_ID_BALLOON) - 1 ||
            memcmp(text, VIRTIO_ID_BALLOON, sizeof(VIRTIO_ID_BALLOON) - 1))
            continue;
        /* One character per feature bit, '0' or '1', bit 0 first. */
        len = hak_os_read_file(virtio_path(&path, root, device, "/features"), text, sizeof(text));
        if (len > VIRTIO_BALLOON_F_REPORTING && text[VIRTIO_BALLOON_F_REPORTING] == '1')
            return true;
    }
    return false;
}

bool hak_os_map_at(void *addr, size_t size)
{
    int saved = errno; /* a refusal here is no error of the caller's */
    if (!map_exactly_at((uintptr_t)addr, size, PROT_READ | PROT_WRITE, 0)) {
        errno = saved;
        return false;
    }
    hak_stat_add(HAK_STAT_MAPPED_BYTES, size);
    return true;
}

/* Whether no mapping holds the page at addr (mincore's ENOMEM; EAGAIN,
 * a kernel short of memory for its answer, asks again). */
static bool page_unmapped(const char *addr)
{
    unsigned char resident;
    int result;
    while ((result = mincore((void *)addr, HAK_PAGE_SIZE, &resident)) != 0 && errno == EAGAIN)
        ;
    return result != 0 && errno == ENOMEM;
}

/* After a move that failed: the parts of dst the kernel had unmapped
 * before it gave up mapped again (a source over two mappings fails so
 * before 6.17, after it unmapped all of dst; from 6.17 a move over several
 * may stop after some), found by mincore, which fails on a range with a
 * hole; true when some were.  A part another thread's mmap took meanwhile
 * refuses the mapping, and stays that thread's.  Not accounted: the
 * caller's range was, and a kernel before 5.2, which weighs a request
 * against what is free, could refuse it under pressure. */
static bool map_holes(char *dst, size_t size)
{
    enum { BATCH_PAGES = 1024 };
    unsigned char resident[BATCH_PAGES];
    /* Before 6.17 the kernel unmapped all of dst: one mapping fills it. */
    if (map_exactly_at((uintptr_t)dst, size, PROT_READ | PROT_WRITE, MAP_NORESERVE))
        return true;
    bool mapped = false;
    char *end = dst + size;
    for (char *batch = dst; batch < end; batch += BATCH_PAGES * HAK_PAGE_SIZE) {
        size_t length = (size_t)(end - batch) < BATCH_PAGES * HAK_PAGE_SIZE
                            ? (size_t)(end - batch)
                            : BATCH_PAGES * HAK_PAGE_SIZE;
        if (mincore(batch, length, resident) == 0)
            continue;
        for (char *page = batch; page < batch + length;) {
            char *hole_end = page;
            while (hole_end < batch + length && page_unmapped(hole_end))
                hole_end += HAK_PAGE_SIZE;
            if (hole_end == page) {
                page += HAK_PAGE_SIZE;
                continue;
            }
            if (map_exactly_at((uintptr_t)page, (size_t)(hole_end - page), PROT_READ | PROT_WRITE,
                               MAP_NORESERVE))
                mapped = true;
            else if (errno != EEXIST)
                hak_fatal("cannot map again the pages a failed move unmapped at", page);
            page = hole_end;
        }
    }
    return mapped;
}

bool hak_os_move(void *src, size_t size, void *dst, bool *dst_fresh)
{
    *dst_fresh = false;
    int saved = errno; /* a refusal is no error of the caller's */
    if (mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED) {
        hak_stat_add(HAK_STAT_UNMAPPED_BYTES, size);
        return true;
    }
    /* Left unmapped, dst would be a hole in the caller's block. */
    *dst_fresh = map_holes(dst, size);
    errno = saved;
    return false;
}

#ifndef MREMAP_DONTUNMAP
#define MREMAP_DONTUNMAP 4 /* Linux 5.7 */
#endif

/* Ranges hak_os_lend moved into other mappings and not yet unmapped with
 * them (hak_os_forget_lent).  Each may split the mapping it lands in into
 * three, and the kernel counts mappings against vm.max_map_count (65530
 * by default), the program's own with them: past this many, no more. */
#define MAX_LENT_RANGES 4096
static atomic_uint live_lent_ranges;
/* Set once the kernel refused a lend for want of MREMAP_DONTUNMAP (EINVAL,
 * before 5.7), or a filter refused the call: the pages go back and fresh
 * ones fault in, as before lending was tried. */
static atomic_bool lend_unsupported;

/* How long the answer of memory_locked stands. */
#define LOCKED_LOOK_MS 1000
static _Atomic uint64_t locked_look_ms;
static atomic_bool locked_seen = true; /* until the first look has answered */

/* Whether the process has locked memory (mlock, mlockall: VmLck in
 * /proc/self/status, or no answer), looked at once a second at most: a
 * move with MREMAP_DONTUNMAP unlocks the whole mapping it moves out of,
 * not only the range moved, so that the region's blocks in use could be
 * swapped out.  A lock taken within the second after a look is missed. */
static bool memory_locked(void)
{
    uint64_t now = hak_os_now_ms();
    uint64_t last = atomic_load_explicit(&locked_look_ms, memory_order_relaxed);
    if (last && now - last < LOCKED_LOOK_MS)
        return atomic_load_explicit(&locked_seen, memory_order_relaxed);
    char status[4096];
    const char *locked_kb =
        hak_os_status_field("/proc/self/status", "VmLck:", status, sizeof(status));
    bool locked = !locked_kb || *locked_kb != '0';
    atomic_store_explicit(&locked_seen, locked, memory_order_relaxed);
    atomic_store_explicit(&locked_look_ms, now ? now : 1, memory_order_release);
    return locked;
}

/* The kernel has not refused a lend, and the bound on ranges is not
 * reached. */
static bool lend_allowed(void)
{
    return !atomic_load_explicit(&lend_unsupported, memory_order_relaxed) &&
           atomic_load_explicit(&live_lent_ranges, memory_order_relaxed) < MAX_LENT_RANGES;
}

bool hak_os_can_lend(void)
{
    return lend_allowed() && !memory_locked();
}

bool hak_os_lent_ranges_to_spare(void)
{
    return atomic_load_explicit(&live_lent_ranges, memory_order_relaxed) < MAX_LENT_RANGES / 2;
}

enum hak_lend_result hak_os_lend(void *src, size_t size, void *dst)
{
    if (!lend_allowed())
        return HAK_LEND_REFUSED;
    int saved = errno; /* a refusal is no error of the caller's */
    enum hak_lend_result result = HAK_LENT;
    if (mremap(src, size, size, MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, dst) !=
        MAP_FAILED) {
        hak_stat_add(HAK_STAT_LENT_BYTES, size);
    } else if (errno == EINVAL || errno == EPERM || errno == ENOSYS) { /* or a seccomp filter */
        atomic_store_explicit(&lend_unsupported, true, memory_order_relaxed);
        hak_stat_add(HAK_STAT_LEND_FAILURES, 1);
        result = HAK_LEND_REFUSED;
    } else {
        map_holes(dst, size);
        hak_stat_add(HAK_STAT_LEND_FAILURES, 1);
        result = HAK_LEND_FAILED;
    }
    if (result != HAK_LEND_REFUSED)
        atomic_fetch_add_explicit(&live_lent_ranges, 1, memory_order_relaxed);
    errno = saved;
    return result;
}

void hak_os_forget_lent(uint32_t ranges)
{
    atomic_fetch_sub_explicit(&live_lent_ranges, ranges, memory_order_relaxed);
}

bool hak_os_map_anew(void *addr, size_t size)
{
    int saved = errno; /* a refusal is no error of the caller's */
    if (mmap(addr, size, PROT_READ | PROT_WRITE, MAP_FLAGS | MAP_FIXED, -1, 0) == MAP_FAILED) {
        /* Before 6.12 the kernel may have unmapped the range first. */
        map_holes(addr, size);
        errno = saved;
        return false;
    }
    hak_stat_add(HAK_STAT_DECOMMITTED_BYTES, size);
    return true;
}

/* The decimal number at *text, which moves past it. */
static unsigned parse_number(const char **text)
{
    unsigned number = 0;
    for (; **text >= '0' && **text <= '9' && number < 100000; (*text)++)
        number = number * 10 + (unsigned)(**text - '0');
    return number;
}

bool hak_os_release_moves_over_mappings(const char *release)
{
    unsigned major = parse_number(&release);
    if (*release++ != '.')
        return false;
    unsigned minor = parse_number(&release);
    return major > 6 || (major == 6 && minor >= 17);
}

/* 0 until asked, then 1 where the kernel moves over mappings, 2 where not. */
static atomic_int moves_over_mappings;

bool hak_os_moves_over_mappings(void)
{
    int known = atomic_load_explicit(&moves_over_mappings, memory_order_relaxed);
    if (!known) {
        struct utsname name;
        known = uname(&name) == 0 && hak_os_release_moves_over_mappings(name.release) ? 1 : 2;
        atomic_store_explicit(&moves_over_mappings, known, memory_order_relaxed);
    }
    return known == 1;
}

void hak_os_mbind_move(void *addr, size_t size, enum hak_os_mpol mode, const unsigned long *mask)
{
    enum { MPOL_MF_MOVE_FLAG = 1 << 1 };
    syscall(SYS_mbind, addr, size, (int)mode, mask, (unsigned long)HAK_OS_MAX_NODES + 1,
            MPOL_MF_MOVE_FLAG);
}

bool hak_os_file_id(int fd, struct hak_os_file_id *id)
{
    struct stat st;
    if (fstat(fd, &st))
        return false;
    *id = (struct hak_os_file_id){(uint64_t)st.st_dev, (uint64_t)st.st_ino};
    return true;
}

bool hak_os_is_file(int fd, const struct hak_os_file_id *id)
{
    struct hak_os_file_id now;
    return hak_os_file_id(fd, &now) && now.dev == id->dev && now.ino == id->ino;
}

int hak_os_keep_fd(int fd)
{
    return fcntl(fd, F_DUPFD_CLOEXEC, 64);
}

int hak_os_open_append(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
}

void hak_os_close(int fd)
{
    close(fd);
}

unsigned hak_os_pid(void)
{
    return (unsigned)getpid();
}

void hak_os_yield(void)
{
    sched_yield();
}

bool hak_os_single_threaded(void)
{
#if HAVE_DECL___LIBC_SINGLE_THREADED
    return __libc_single_threaded;
#else
    return false;
#endif
}

#if HAVE__IO_LIST_LOCK
/* glibc's, exported since 2.2.5 (the lock is recursive), though no
 * installed header declares them any more. */
void _IO_list_lock(void);
void _IO_list_unlock(void);
void _IO_list_resetlock(void);

void hak_os_stdio_list_lock(void)
{
    _IO_list_lock();
}

void hak_os_stdio_list_unlock(void)
{
    _IO_list_unlock();
}

void hak_os_stdio_list_reset(void)
{
    _IO_list_resetlock();
}
#else
void hak_os_stdio_list_lock(void) {}

void hak_os_stdio_list_unlock(void) {}

void hak_os_stdio_list_reset(void) {}
#endif

uint64_t hak_os_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

bool hak_os_lock_within(pthread_mutex_t *mutex, unsigned ms)
{
#if HAVE_PTHREAD_MUTEX_CLOCKLOCK
    clockid_t clock = CLOCK_MONOTONIC;
#else
    clockid_t clock = CLOCK_REALTIME; /* pthread_mutex_timedlock's */
#endif
    struct timespec deadline;
    clock_gettime(clock, &deadline);
    uint64_t ns = (uint64_t)deadline.tv_nsec + (uint64_t)ms * 1000000;
    deadline.tv_sec += (time_t)(ns / 1000000000);
    deadline.tv_nsec = (long)(ns % 1000000000);
#if HAVE_PTHREAD_MUTEX_CLOCKLOCK
    return pthread_mutex_clocklock(mutex, clock, &deadline) == 0;
#else
    return pthread_mutex_timedlock(mutex, &deadline) == 0;
#endif
}

uint64_t hak_os_thread_minor_faults(void)
{
    struct rusage usage;
    if (getrusage(RUSAGE_THREAD, &usage) != 0)
        return 0;
    return (uint64_t)usage.ru_minflt;
}

uint64_t hak_os_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

uint64_t hak_os_now_us(void)
{
    return hak_os_now_ns() / 1000;
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
