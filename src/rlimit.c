/* The calls that set an address-space limit (RLIMIT_AS).  hakmem reserves
 * address space as big as the machine's memory for its SuperSlabs
 * (arena/superslab.h), and RLIMIT_AS counts reserved address space: a
 * program that sets itself a budget below that (Python's
 * resource.setrlimit(RLIMIT_AS, 2 GiB), say) would find its next mmap or
 * thread refused.  So once such a limit is in force, the unused part of the
 * reservation goes back (the kernel checks no usage when it sets a limit).
 * A limit set as what the process has plus some leaves it in place, as it
 * does glibc's arenas: the program counted it.  The PageArenas' spare
 * chunks, mapped ahead and never touched, go back under any limit.
 *
 * All four go to the kernel's prlimit64, as glibc's own do on 64-bit Linux,
 * rather than to the C library's next definition: a statically linked
 * program has no dynamic loader to find one. */
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "arena/page_arena.h"
#include "internal.h"
#include "os.h"

static int limit_process(pid_t pid, int resource, const void *limit, void *old)
{
    long status = syscall(SYS_prlimit64, pid, resource, limit, old);
    /* The limit now in force, whichever thread or process pid named. */
    if (status == 0 && resource == RLIMIT_AS && limit) {
        hak_os_release_reservation_over_limit();
        if (hak_os_address_space_limited())
            hak_page_arena_release_spares();
    }
    return (int)status;
}

/* struct rlimit64 is struct rlimit on 64-bit Linux. */
_Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "rlimit64 is rlimit");

HAK_API int setrlimit(__rlimit_resource_t resource, const struct rlimit *limit)
{
    return limit_process(0, (int)resource, limit, NULL);
}

HAK_API int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit)
{
    return limit_process(0, (int)resource, limit, NULL);
}

HAK_API int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *limit,
                    struct rlimit *old)
{
    return limit_process(pid, (int)resource, limit, old);
}

HAK_API int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *limit,
                      struct rlimit64 *old)
{
    return limit_process(pid, (int)resource, limit, old);
}
