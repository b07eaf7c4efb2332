# The allocator library.
lib_LTLIBRARIES += src/libhakmem.la
src_libhakmem_la_SOURCES = \
	src/internal.h \
	src/malloc_api.c \
	src/glibc_ext.c \
	src/cxx_operators.c \
	src/affinity.c \
	src/rlimit.c \
	src/init.c \
	src/fault.c src/fault.h \
	src/harden.c src/harden.h \
	src/memcheck.h \
	src/next_symbol.h \
	src/options.c src/options.h src/options_table.c \
	src/os.c src/os.h \
	src/print.c src/print.h \
	src/stats.c src/stats.h \
	src/stats_report.c src/stats_report.h \
	src/thread_ordinal.c src/thread_ordinal.h \
	src/fork_locks.c src/fork_locks.h \
	src/block/block_link.c src/block/block_link.h \
	src/block/canary.c src/block/canary.h \
	src/block/size_class.c src/block/size_class.h \
	src/front/quarantine.c src/front/quarantine.h \
	src/front/thread_heap.c src/front/thread_heap.h \
	src/arena/abandoned.c src/arena/abandoned.h \
	src/arena/hot_span_box.c src/arena/hot_span_box.h \
	src/arena/large.c src/arena/large.h \
	src/arena/mappings.c src/arena/mappings.h \
	src/arena/meta.c src/arena/meta.h \
	src/arena/page_arena.c src/arena/page_arena.h \
	src/arena/page_map.c src/arena/page_map.h \
	src/arena/shared_pool.c src/arena/shared_pool.h \
	src/arena/slab.c src/arena/slab.h \
	src/arena/span_bins.h \
	src/arena/superslab.c src/arena/superslab.h \
	src/arena/node_block.c src/arena/node_block.h \
	src/numa/binding.c src/numa/binding.h \
	src/numa/cpu.h \
	src/numa/hwloc_api.c src/numa/hwloc_api.h \
	src/numa/node.c src/numa/node.h \
	src/numa/sysfs.c src/numa/sysfs.h \
	src/numa/topology.c src/numa/topology.h \
	src/numa/topology_hwloc.c src/numa/topology_hwloc.h
src_libhakmem_la_CPPFLAGS = -D_GNU_SOURCE -I$(top_srcdir)/include -I$(top_builddir) $(HWLOC_CFLAGS)
src_libhakmem_la_CFLAGS = $(AM_CFLAGS) $(HAKMEM_CFLAGS)
src_libhakmem_la_LDFLAGS = -version-info 0:0:0 -no-undefined -Wl,--no-undefined \
	-Wl,--version-script=$(top_srcdir)/src/hakmem.map
# hwloc is opened with dlopen when a process needs the topology.
src_libhakmem_la_LIBADD = -lpthread -ldl
EXTRA_DIST += src/hakmem.map
