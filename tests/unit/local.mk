# White-box unit tests of the allocator's internals.  The library hides
# everything but the allocation API (-fvisibility=hidden), so the tests link
# the same sources built again as a convenience library with default
# visibility.  It defines malloc and free too: the test programs run on
# hakmem.
check_LTLIBRARIES += tests/unit/libhakmem_internal.la
tests_unit_libhakmem_internal_la_SOURCES = $(src_libhakmem_la_SOURCES)
tests_unit_libhakmem_internal_la_CPPFLAGS = $(src_libhakmem_la_CPPFLAGS)
tests_unit_libhakmem_internal_la_CFLAGS = $(AM_CFLAGS)
tests_unit_libhakmem_internal_la_LIBADD = $(src_libhakmem_la_LIBADD)

UNIT_TESTS = \
	tests/unit/test_size_class \
	tests/unit/test_canary \
	tests/unit/test_slab \
	tests/unit/test_page_map \
	tests/unit/test_page_arena \
	tests/unit/test_remote \
	tests/unit/test_foreign_free \
	tests/unit/test_refill \
	tests/unit/test_cache_room \
	tests/unit/test_cache_growth \
	tests/unit/test_decommit \
	tests/unit/test_cpu_move \
	tests/unit/test_retained \
	tests/unit/test_lend \
	tests/unit/test_lend_old_kernel \
	tests/unit/test_stats \
	tests/unit/test_free_memory_reported \
	tests/unit/test_os_map \
	tests/unit/test_startup_reads \
	tests/unit/test_old_kernel_moves \
	tests/unit/test_large_mappings \
	tests/unit/test_parked_heap \
	tests/unit/test_phase_reuse
check_PROGRAMS += $(UNIT_TESTS)
TESTS += $(UNIT_TESTS)

UNIT_CPPFLAGS = $(src_libhakmem_la_CPPFLAGS) -I$(top_srcdir)/src
# -fno-builtin: a malloc whose block a test only frees again is there for
# what it does to the caches, which a compiler that knows malloc would take
# out (clang does).
UNIT_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -fno-builtin
UNIT_LDADD = tests/unit/libhakmem_internal.la $(PTHREAD_LIBS)

tests_unit_test_size_class_SOURCES = tests/unit/test_size_class.c tests/unit/unit.h
tests_unit_test_size_class_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_size_class_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_size_class_LDADD = $(UNIT_LDADD)

tests_unit_test_canary_SOURCES = tests/unit/test_canary.c tests/unit/unit.h
tests_unit_test_canary_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_canary_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_canary_LDADD = $(UNIT_LDADD)

tests_unit_test_os_map_SOURCES = tests/unit/test_os_map.c tests/unit/unit.h tests/unit/refusing_mremap.h
tests_unit_test_os_map_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_os_map_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_os_map_LDADD = $(UNIT_LDADD)

tests_unit_test_startup_reads_SOURCES = tests/unit/test_startup_reads.c tests/unit/unit.h
tests_unit_test_startup_reads_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_startup_reads_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_startup_reads_LDADD = $(UNIT_LDADD)

tests_unit_test_old_kernel_moves_SOURCES = tests/unit/test_old_kernel_moves.c tests/unit/unit.h \
	tests/unit/refusing_mremap.h
tests_unit_test_old_kernel_moves_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_old_kernel_moves_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_old_kernel_moves_LDADD = $(UNIT_LDADD)

tests_unit_test_large_mappings_SOURCES = tests/unit/test_large_mappings.c tests/unit/unit.h
tests_unit_test_large_mappings_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_large_mappings_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_large_mappings_LDADD = $(UNIT_LDADD)

tests_unit_test_parked_heap_SOURCES = tests/unit/test_parked_heap.c tests/unit/unit.h
tests_unit_test_parked_heap_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_parked_heap_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_parked_heap_LDADD = $(UNIT_LDADD)

tests_unit_test_slab_SOURCES = tests/unit/test_slab.c tests/unit/unit.h
tests_unit_test_slab_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_slab_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_slab_LDADD = $(UNIT_LDADD)

tests_unit_test_page_map_SOURCES = tests/unit/test_page_map.c tests/unit/unit.h
tests_unit_test_page_map_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_page_map_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_page_map_LDADD = $(UNIT_LDADD)

tests_unit_test_page_arena_SOURCES = tests/unit/test_page_arena.c tests/unit/unit.h
tests_unit_test_page_arena_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_page_arena_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_page_arena_LDADD = $(UNIT_LDADD)

tests_unit_test_foreign_free_SOURCES = tests/unit/test_foreign_free.c tests/unit/unit.h
tests_unit_test_foreign_free_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_foreign_free_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_foreign_free_LDADD = $(UNIT_LDADD)

tests_unit_test_remote_SOURCES = tests/unit/test_remote.c tests/unit/unit.h
tests_unit_test_remote_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_remote_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_remote_LDADD = $(UNIT_LDADD)

tests_unit_test_cache_room_SOURCES = tests/unit/test_cache_room.c tests/unit/unit.h
tests_unit_test_cache_room_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_cache_room_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_cache_room_LDADD = $(UNIT_LDADD)

tests_unit_test_refill_SOURCES = tests/unit/test_refill.c tests/unit/unit.h
tests_unit_test_refill_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_refill_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_refill_LDADD = $(UNIT_LDADD)

tests_unit_test_cache_growth_SOURCES = tests/unit/test_cache_growth.c tests/unit/unit.h
tests_unit_test_cache_growth_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_cache_growth_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_cache_growth_LDADD = $(UNIT_LDADD)

tests_unit_test_decommit_SOURCES = tests/unit/test_decommit.c tests/unit/unit.h
tests_unit_test_decommit_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_decommit_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_decommit_LDADD = $(UNIT_LDADD)

tests_unit_test_cpu_move_SOURCES = tests/unit/test_cpu_move.c tests/unit/unit.h
tests_unit_test_cpu_move_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_cpu_move_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_cpu_move_LDADD = $(UNIT_LDADD)

tests_unit_test_lend_SOURCES = tests/unit/test_lend.c tests/unit/unit.h tests/unit/refusing_mremap.h
tests_unit_test_lend_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_lend_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_lend_LDADD = $(UNIT_LDADD)

tests_unit_test_lend_old_kernel_SOURCES = $(tests_unit_test_lend_SOURCES)
tests_unit_test_lend_old_kernel_CPPFLAGS = $(UNIT_CPPFLAGS) -DTEST_LEND_OLD_KERNEL
tests_unit_test_lend_old_kernel_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_lend_old_kernel_LDADD = $(UNIT_LDADD)

tests_unit_test_retained_SOURCES = tests/unit/test_retained.c tests/unit/unit.h
tests_unit_test_retained_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_retained_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_retained_LDADD = $(UNIT_LDADD)

tests_unit_test_stats_SOURCES = tests/unit/test_stats.c tests/unit/unit.h
tests_unit_test_stats_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_stats_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_stats_LDADD = $(UNIT_LDADD)

tests_unit_test_free_memory_reported_SOURCES = tests/unit/test_free_memory_reported.c tests/unit/unit.h
tests_unit_test_free_memory_reported_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_free_memory_reported_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_free_memory_reported_LDADD = $(UNIT_LDADD)

tests_unit_test_phase_reuse_SOURCES = tests/unit/test_phase_reuse.c tests/unit/unit.h
tests_unit_test_phase_reuse_CPPFLAGS = $(UNIT_CPPFLAGS)
tests_unit_test_phase_reuse_CFLAGS = $(UNIT_CFLAGS)
tests_unit_test_phase_reuse_LDADD = $(UNIT_LDADD)
