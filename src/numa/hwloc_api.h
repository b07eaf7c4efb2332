/* hwloc, reached through dlopen rather than linked.  Linking it would map
 * libhwloc and the libraries it needs (libudev, libm) into every process
 * hakmem is preloaded into; most of them never need the topology, and none
 * does on a one-node machine. */
#ifndef HAK_HWLOC_API_H
#define HAK_HWLOC_API_H

#include <hwloc.h>
#include <stdbool.h>

/* hwloc 2.x keeps this soname (ABI 15) from 2.0 on. */
#define HAK_HWLOC_SONAME "libhwloc.so.15"
/* hwloc_topology_set_components appeared in 2.1. */
#define HAK_HWLOC_MIN_VERSION 0x00020100u

#define HAK_HWLOC_FUNCTIONS(X)                                                                     \
    X(hwloc_get_api_version)                                                                       \
    X(hwloc_topology_init)                                                                         \
    X(hwloc_topology_set_flags)                                                                    \
    X(hwloc_topology_set_all_types_filter)                                                         \
    X(hwloc_topology_set_type_filter)                                                              \
    X(hwloc_topology_set_components)                                                               \
    X(hwloc_topology_load)                                                                         \
    X(hwloc_topology_destroy)                                                                      \
    X(hwloc_topology_get_complete_cpuset)                                                          \
    X(hwloc_topology_get_allowed_nodeset)                                                          \
    X(hwloc_get_nbobjs_by_depth)                                                                   \
    X(hwloc_get_obj_by_depth)                                                                      \
    X(hwloc_distances_get_by_type)                                                                 \
    X(hwloc_distances_release)                                                                     \
    X(hwloc_bitmap_dup)                                                                            \
    X(hwloc_bitmap_free)                                                                           \
    X(hwloc_bitmap_isset)                                                                          \
    X(hwloc_bitmap_next)                                                                           \
    X(hwloc_bitmap_last)                                                                           \
    X(hwloc_bitmap_weight)                                                                         \
    X(hwloc_bitmap_clr)

/* One pointer per function, named after it.  Tests fill the table with the
 * functions of a linked hwloc; the allocator fills it with dlsym. */
struct hak_hwloc {
#define HAK_HWLOC_POINTER(name) __typeof__(&name) name;
    HAK_HWLOC_FUNCTIONS(HAK_HWLOC_POINTER)
#undef HAK_HWLOC_POINTER
};

/* Loads libhwloc and fills api; false (api untouched, *why saying which)
 * when the library is missing or older than HAK_HWLOC_MIN_VERSION.  Calls
 * malloc, through the dynamic loader and hwloc's constructors. */
bool hak_hwloc_open(struct hak_hwloc *api, const char **why);

#endif
