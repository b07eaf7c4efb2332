#include "config.h"

#if HAKMEM_HAVE_NUMA

#include "hwloc_api.h"

#include <dlfcn.h>

bool hak_hwloc_open(struct hak_hwloc *api, const char **why)
{
    /* Never closed, not even when unusable: this runs inside malloc, where
     * unloading code (and running its destructors) is asking for trouble. */
    void *library = dlopen(HAK_HWLOC_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!library) {
        *why = HAK_HWLOC_SONAME " not found";
        return false;
    }
    *why = HAK_HWLOC_SONAME " is not hwloc 2.1 or later";
    struct hak_hwloc found;
#define HAK_HWLOC_LOOKUP(name)                                                                     \
    found.name = (__typeof__(&name))dlsym(library, #name);                                         \
    if (!found.name)                                                                               \
        return false;
    HAK_HWLOC_FUNCTIONS(HAK_HWLOC_LOOKUP)
#undef HAK_HWLOC_LOOKUP
    unsigned version = found.hwloc_get_api_version();
    if (version >> 16 != HWLOC_API_VERSION >> 16 || version < HAK_HWLOC_MIN_VERSION)
        return false;
    *api = found;
    return true;
}

#endif
