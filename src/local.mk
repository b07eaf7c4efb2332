# The allocator library.
lib_LTLIBRARIES += src/libhakmem.la
src_libhakmem_la_SOURCES = \
	src/internal.h \
	src/malloc_api.c \
	src/init.c \
	src/options.c src/options.h \
	src/os.c src/os.h \
	src/print.c src/print.h \
	src/stats.c src/stats.h \
	src/front/size_class.c src/front/size_class.h \
	src/front/thread_heap.c src/front/thread_heap.h \
	src/arena/abandoned.c src/arena/abandoned.h \
	src/arena/hot_span_box.c src/arena/hot_span_box.h \
	src/arena/large.c src/arena/large.h \
	src/arena/meta.c src/arena/meta.h \
	src/arena/page_arena.c src/arena/page_arena.h \
	src/arena/page_map.c src/arena/page_map.h \
	src/arena/shared_pool.c src/arena/shared_pool.h \
	src/arena/slab.c src/arena/slab.h \
	src/arena/superslab.c src/arena/superslab.h \
	src/numa/node.c src/numa/node.h
src_libhakmem_la_CPPFLAGS = -D_GNU_SOURCE -I$(top_srcdir)/include -I$(top_builddir)
src_libhakmem_la_CFLAGS = $(AM_CFLAGS) $(HAKMEM_CFLAGS) $(WARN_CFLAGS)
src_libhakmem_la_LDFLAGS = -version-info 0:0:0 -no-undefined \
	-Wl,--version-script=$(top_srcdir)/src/hakmem.map
src_libhakmem_la_LIBADD = -lpthread
EXTRA_DIST += src/hakmem.map
