#include "harden.h"

#include <stdlib.h>
#include <string.h>

#include "memcheck.h"
#include "options.h"

struct hak_harden hak_harden = {.level = 1, .route = HAK_ROUTE_FAST};

/* Client requests mean something to memcheck only; other tools (callgrind,
 * which measures the fast paths) must see hakmem as it runs natively.
 * Valgrind preloads each tool's own library into the program. */
static bool under_memcheck(void)
{
    if (!hak_memcheck_available() || !RUNNING_ON_VALGRIND)
        return false;
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload_memcheck");
}

void hak_harden_init(void)
{
    hak_harden.level = hak_options.harden;
    hak_harden.memcheck = under_memcheck();
    hak_harden.checked = hak_harden.level == 2 || hak_harden.memcheck;
    hak_harden.guard_bytes = hak_harden.level == 2 ? (uint32_t)HAK_PAGE_SIZE : 0;
    hak_harden.route = hak_harden.checked      ? HAK_ROUTE_CHECKED
                       : hak_harden.level == 0 ? HAK_ROUTE_PLAIN
                                               : HAK_ROUTE_FAST;
}
