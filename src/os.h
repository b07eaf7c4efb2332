/* The one door to the kernel for memory: mapping, decommitting, binding. */
#ifndef HAK_OS_H
#define HAK_OS_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* Anonymous read-write memory aligned to align (a power of two, at least a
 * page), or NULL with errno ENOMEM. */
void *hak_os_map_aligned(size_t size, size_t align);
/* Leaves errno as it was; where the kernel refuses (a split past
 * vm.max_map_count), the range stays mapped and its pages go back. */
void hak_os_unmap(void *addr, size_t size);
/* Address space alone, parts of part_size bytes side by side (at most
 * HAK_MAX_NODES), aligned to align, for hak_os_map_reserved to make memory
 * bit by bit: each part's first head_size bytes from their start, and the
 * rest from where they end; no access, no memory, nothing counted against
 * the commit limit.  One per process (the SuperSlab region, a part per
 * node, each with its page table as its head); NULL where there is one
 * already, or under an address-space limit (RLIMIT_AS, which counts
 * reserved address space).  Under a limit the program sets later, none of
 * it is made memory any more, and where that limit is below what the
 * process has, what of each part's head and rest was never made memory
 * goes back to the kernel (hak_os_release_reservation_over_limit). */
void *hak_os_reserve(size_t head_size, size_t part_size, unsigned parts, size_t align);
/* Makes part of the reservation read-write memory, as hak_os_map_aligned's;
 * false under an address-space limit, where it is no longer reserved, or
 * where the kernel refuses, and for a range across a part's head and its
 * rest. */
bool hak_os_map_reserved(void *addr, size_t size);
/* Where the process's address space exceeds its limit (RLIMIT_AS), one
 * set since the reservation was made, what of each of the reservation's
 * parts was never made memory goes back; true if some did.  The setrlimit
 * wrappers ask as soon as a new limit is in force (rlimit.c), so that a
 * limit the program sets below what it has, its budget for what it uses,
 * lets its own mappings through; hakmem's mappings ask when they fail, and
 * the thread heaps now and then (front/thread_heap.c), for a limit set
 * from outside the process (prlimit --pid). */
bool hak_os_release_reservation_over_limit(void);
/* Whether the process runs under an address-space limit (RLIMIT_AS). */
bool hak_os_address_space_limited(void);
/* Undoes hak_os_map_reserved: reserved again, with no memory; and where
 * it was the last memory made in its head or rest, given back with what
 * follows under a limit. */
void hak_os_unmap_reserved(void *addr, size_t size);
/* Held across fork(). */
void hak_os_reservation_lock(void);
void hak_os_reservation_unlock(void);
/* The machine's memory, or 0 if the kernel does not tell. */
size_t hak_os_memory_bytes(void);
/* Whether the kernel could grant one mapping of size bytes: no more than
 * the address-space or data limit, nor than memory and swap together,
 * which its default overcommit policy refuses whatever is free (so that
 * giving memory back cannot help such a request; under strict accounting
 * with a ratio over 100 it could, a case left out). */
bool hak_os_could_map(size_t size);
/* Asks for transparent huge pages over the range (before first touch). */
void hak_os_advise_huge(void *addr, size_t size);
/* How many of the range's pages are resident, in *resident; false when the
 * kernel cannot tell (mincore failed: not mapped, or refused). */
bool hak_os_resident_pages(void *addr, size_t size, size_t *resident);
/* Whether at least half the range's pages are resident (the huge-page
 * guesses of the PageArena and the large blocks); false where it is not
 * mapped. */
bool hak_os_mostly_resident(void *addr, size_t size);
/* Gives the pages back; the range stays mapped and reads as zeros.  False
 * when the kernel refused (locked pages): the range keeps what it held.
 * errno is left as it was. */
bool hak_os_decommit(void *addr, size_t size);
/* The same for count ranges at once; returns the bytes given back (and
 * counted as decommitted). */
size_t hak_os_decommit_ranges(const struct iovec *ranges, size_t count);
/* Guard pages (HAKMEM_HARDEN=2): any access to the range faults, until
 * hak_os_unguard makes it read-write again.  Aborts when the kernel
 * refuses (vm.max_map_count reached). */
void hak_os_guard(void *addr, size_t size);
void hak_os_unguard(void *addr, size_t size);
/* The kernel's memory policies (mbind(2)), over OS node ids below
 * HAK_OS_MAX_NODES. */
#define HAK_OS_MAX_NODES 1024
#define HAK_OS_NODEMASK_WORDS (HAK_OS_MAX_NODES / (8 * sizeof(unsigned long)))
enum hak_os_mpol { HAK_OS_MPOL_PREFERRED = 1, HAK_OS_MPOL_BIND = 2, HAK_OS_MPOL_INTERLEAVE = 3 };
/* Sets the policy of a fresh range before first touch; silently does
 * nothing where the kernel has no NUMA support. */
void hak_os_mbind(void *addr, size_t size, enum hak_os_mpol mode, const unsigned long *mask);
/* The same for a range already in use: its pages move to the new nodes. */
void hak_os_mbind_move(void *addr, size_t size, enum hak_os_mpol mode, const unsigned long *mask);
/* The nodes of a process-wide MPOL_BIND policy (numactl --membind); false
 * for any other policy. */
bool hak_os_bind_policy_nodes(unsigned long mask[HAK_OS_NODEMASK_WORDS]);
/* The nodes the calling thread's cpuset lets it allocate from; false where
 * the kernel cannot say. */
bool hak_os_allowed_memory_nodes(unsigned long mask[HAK_OS_NODEMASK_WORDS]);
/* Up to size bytes of a file (a sysfs or procfs one); 0 when it cannot be
 * read. */
size_t hak_os_read_file(const char *path, char *buf, size_t size);
/* The value of a line of a status file ("/proc/self/status"), the one
 * that starts with key ("VmLck:"), read into buf (size bytes), the blanks
 * after the key skipped and the line ended at its newline; NULL when the
 * file has no such line or buf ends inside it. */
const char *hak_os_status_field(const char *path, const char *key, char *buf, size_t size);
/* Whether the hypervisor takes back the memory this (guest) kernel frees: a
 * virtio balloon that reports free pages, as root/sys/bus/virtio tells
 * (root: "" for the machine's own).  One caller at a time: its buffers are
 * static. */
bool hak_os_free_memory_reported(const char *root);
/* What the first write to a fresh small page costs here, in ns (a few
 * timed, the least kept): about 1 us on hardware, 10 us in a VM that
 * shadows the guest's page tables.  0 when no page could be mapped, and
 * where the clock is too coarse to tell. */
uint64_t hak_os_small_page_fault_ns(void);
/* Maps [addr, addr + size) where that address space is free (to extend a
 * mapping in place); false when it cannot (some of it taken, or out of
 * memory), errno then as it was: the caller tries elsewhere. */
bool hak_os_map_at(void *addr, size_t size);
/* Moves the pages of [src, src + size) over dst, a mapping of ours which
 * they replace, without copying or faulting them in again; src is then
 * unmapped.  False when the kernel cannot (before Linux 6.17, a range over
 * more than one kernel mapping): src is as it was (from 6.17, where a move
 * over several may stop after some, not always), and dst mapped still;
 * *dst_fresh says whether the kernel had unmapped some of it before it
 * failed, mapped again with fresh pages and no NUMA policy.  In the
 * moment between, another thread's mmap may take the hole, which is then
 * taken for dst still (a window of a few microseconds, on those kernels
 * only). */
bool hak_os_move(void *src, size_t size, void *dst, bool *dst_fresh);
/* Moves the pages of [src, src + size), private anonymous memory of one
 * kernel mapping (of any number from Linux 6.17), to dst, replacing what
 * was mapped there, without copying or faulting them in again; src stays
 * mapped and reads as zeros, as after hak_os_decommit.  The range moved
 * keeps src's mapping's attributes (its NUMA policy, its huge-page advice)
 * for as long as it stays mapped. */
enum hak_lend_result {
    HAK_LENT,
    /* Not tried, or refused before the kernel touched dst: where it knows
     * no MREMAP_DONTUNMAP (before 5.7) or a filter refuses the call, from
     * then on; and past a bound on the ranges lent and not yet unmapped
     * (each may split the mapping it lands in). */
    HAK_LEND_REFUSED,
    /* Failed after the kernel unmapped dst, all or some, which is mapped
     * again with fresh pages and no NUMA policy, as after a failed
     * hak_os_move, and may hold some of src's pages (from 6.17 a move over
     * several mappings may stop after some): a range lent all the same. */
    HAK_LEND_FAILED,
};
enum hak_lend_result hak_os_lend(void *src, size_t size, void *dst);
/* Whether a lend is worth preparing for: the kernel has not refused one,
 * the bound on ranges is not reached, and the process has no locked
 * memory (which a lend would unlock: os.c). */
bool hak_os_can_lend(void);
/* Whether fewer than half the moved ranges the process allows live now:
 * moves into a container that may never be mapped anew (a SuperSlab kept
 * in use) stop there, leaving the rest to those whose ranges go when
 * their container empties. */
bool hak_os_lent_ranges_to_spare(void);
/* The mapping that ranges of those lent landed in was unmapped. */
void hak_os_forget_lent(uint32_t ranges);
/* Memory at addr, all of it mapped already, mapped anew: fresh pages, one
 * kernel mapping where lent ranges cut it into several, which may merge
 * with its neighbours again once bound as they are (the caller's part);
 * false where the kernel refused, the range mapped still (what a kernel
 * before 6.12 unmapped first is mapped again, fresh, as map_holes does
 * after a failed move). */
bool hak_os_map_anew(void *addr, size_t size);
/* Whether the kernel moves the pages of more than one of its mappings in
 * one call (Linux 6.17 on): older ones refuse, after they unmapped the
 * destination, so that only a range known to be one mapping is worth a
 * move there. */
bool hak_os_moves_over_mappings(void);
/* The same for a kernel release as uname(2) gives it ("6.17.0-1-amd64"). */
bool hak_os_release_moves_over_mappings(const char *release);
/* Which file a descriptor leads to, to tell whether it still does. */
struct hak_os_file_id {
    uint64_t dev, ino;
};
bool hak_os_file_id(int fd, struct hak_os_file_id *id);
bool hak_os_is_file(int fd, const struct hak_os_file_id *id);
/* A close-on-exec copy of fd, numbered out of the way of the descriptors
 * programs use (from 64 on); -1 when it cannot be made. */
int hak_os_keep_fd(int fd);
/* For appending a report (created 0644, never through a symbolic link);
 * -1 on failure. */
int hak_os_open_append(const char *path);
void hak_os_close(int fd);
/* Whether the process has never started a second thread (false where the
 * C library does not say). */
bool hak_os_single_threaded(void);
/* The C library's lock on its list of streams (glibc's, where there is
 * one), which fork() takes after the fork handlers have run, and which a
 * thread flushing every stream holds while it waits on each one's lock:
 * taken, given back in the parent, made free in the child (the only
 * thread there). */
void hak_os_stdio_list_lock(void);
void hak_os_stdio_list_unlock(void);
void hak_os_stdio_list_reset(void);
uint64_t hak_os_now_ms(void);
/* The minor page faults the calling thread took so far (those that read
 * nothing from a disk: first touches, copy-on-write, pages of the page
 * cache), as getrusage counts them; 0 where the kernel does not tell. */
uint64_t hak_os_thread_minor_faults(void);
/* Whether age_ms or more passed from then until now: false when then is the
 * later (read under a lock that now was read before), and for an age that
 * would pass the end of time (HAKMEM_DECAY_MS set that high means never). */
static inline bool hak_os_aged(uint64_t now, uint64_t then, uint64_t age_ms)
{
    return now >= then && now - then >= age_ms;
}
unsigned hak_os_pid(void);
/* Lets another thread run, while waiting for one that holds no lock. */
void hak_os_yield(void);
/* Takes mutex, waiting for it up to ms milliseconds; whether it got it. */
bool hak_os_lock_within(pthread_mutex_t *mutex, unsigned ms);
/* Precise, for timing rare events. */
uint64_t hak_os_now_us(void);
uint64_t hak_os_now_ns(void);
void hak_os_write(int fd, const char *buf, size_t len);

#endif
