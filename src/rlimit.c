/* The calls that set an address-space limit (RLIMIT_AS).  hakmem reserves
 * address space as big as the machine's memory for its SuperSlabs
 * (arena/superslab.h), and RLIMIT_AS counts reserved address space: a
 * program that sets itself a budget below that (Python's
 * resource.setrlimit(RLIMIT_AS, 2 GiB), say) would find its next mmap or
 * thread refused.  So the unused part of the reservation goes back before
 * such a limit takes effect.  A limit set as what the process has plus some
 * leaves it in place, as it does glibc's arenas: the program counted it. */
#include <errno.h>
#include <sys/resource.h>
#include <unistd.h>

#include "internal.h"
#include "next_symbol.h"
#include "os.h"

typedef int setrlimit_fn(__rlimit_resource_t, const struct rlimit *);
typedef int prlimit_fn(pid_t, __rlimit_resource_t, const struct rlimit *, struct rlimit *);

static void *next_setrlimit;
static void *next_setrlimit64;
static void *next_prlimit;
static void *next_prlimit64;

static void before_limit(int resource, const struct rlimit *limit)
{
    if (resource == RLIMIT_AS && limit)
        hak_os_release_reservation_for_limit(limit->rlim_cur);
}

static int set_limit(void **next_cache, const char *name, __rlimit_resource_t resource,
                     const struct rlimit *limit)
{
    setrlimit_fn *next = hak_next_symbol(next_cache, name);
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    before_limit(resource, limit);
    return next(resource, limit);
}

static int limit_process(void **next_cache, const char *name, pid_t pid,
                         __rlimit_resource_t resource, const struct rlimit *limit,
                         struct rlimit *old)
{
    prlimit_fn *next = hak_next_symbol(next_cache, name);
    if (!next) {
        errno = ENOSYS;
        return -1;
    }
    if (pid == 0 || pid == getpid())
        before_limit(resource, limit);
    return next(pid, resource, limit, old);
}

HAK_API int setrlimit(__rlimit_resource_t resource, const struct rlimit *limit)
{
    return set_limit(&next_setrlimit, "setrlimit", resource, limit);
}

/* struct rlimit64 is struct rlimit on 64-bit Linux. */
_Static_assert(sizeof(struct rlimit64) == sizeof(struct rlimit), "rlimit64 is rlimit");

HAK_API int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *limit)
{
    return set_limit(&next_setrlimit64, "setrlimit64", resource, (const struct rlimit *)limit);
}

HAK_API int prlimit(pid_t pid, __rlimit_resource_t resource, const struct rlimit *limit,
                    struct rlimit *old)
{
    return limit_process(&next_prlimit, "prlimit", pid, resource, limit, old);
}

HAK_API int prlimit64(pid_t pid, __rlimit_resource_t resource, const struct rlimit64 *limit,
                      struct rlimit64 *old)
{
    return limit_process(&next_prlimit64, "prlimit64", pid, resource, (const struct rlimit *)limit,
                         (struct rlimit *)old);
}
