# The API and behaviour tests.  The C tests link libhakmem, so the standard
# allocation names in them resolve to hakmem; the shell tests preload it into
# real programs and inspect the built library.  They run under automake's
# parallel harness: exit 0 passes, 77 skips, 99 is a hard error.

hakmem_c_tests = \
	tests/test_api \
	tests/test_foreign \
	tests/test_threads \
	tests/test_remote_free \
	tests/test_thread_churn \
	tests/test_fork \
	tests/test_fork_in_handler \
	tests/test_fork_stdio \
	tests/test_oom \
	tests/test_release \
	tests/test_page_telemetry \
	tests/test_misuse \
	tests/test_realloc_checked \
	tests/test_realloc_growth \
	tests/test_large_split \
	tests/test_large_reuse \
	tests/test_large_colour \
	tests/test_trim \
	tests/test_glibc_ext \
	tests/test_calloc

check_PROGRAMS += $(hakmem_c_tests) tests/cxx_map_threads tests/test_cxx_operators \
	tests/cxx_replaced_new
TESTS += $(hakmem_c_tests) tests/test_cxx_operators tests/cxx_replaced_new tests/test_preload.sh tests/test_exports.sh \
	tests/test_harden_levels.sh tests/test_format.sh tests/test_malloc_info.sh \
	tests/test_cxx_preload.sh tests/test_stats_report.sh tests/test_heap_faults.sh
EXTRA_DIST += tests/test_preload.sh tests/preload_compare.sh tests/test_exports.sh \
	tests/test_harden_levels.sh tests/test_format.sh tests/test_malloc_info.sh \
	tests/test_cxx_preload.sh tests/test_stats_report.sh tests/test_heap_faults.sh

TEST_EXTENSIONS = .sh
SH_LOG_COMPILER = $(SHELL)

# Where the shell tests find the library, the helper programs and the public
# header, also when the build tree is not the source tree.
AM_TESTS_ENVIRONMENT = \
	HAKMEM_LIB='$(abs_top_builddir)/src/.libs/libhakmem.so'; \
	HAKMEM_BUILDDIR='$(abs_top_builddir)'; \
	HAKMEM_SRCDIR='$(abs_top_srcdir)'; \
	export HAKMEM_LIB HAKMEM_BUILDDIR HAKMEM_SRCDIR;

# -fno-builtin: the compiler must not fold or drop the allocation calls
# under test.  -no-install: a real executable rather than a libtool wrapper
# script, so that a tool such as valgrind can run it directly.
hakmem_test_cflags = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -fno-builtin
hakmem_test_ldflags = -no-install $(PTHREAD_LIBS)

tests_test_api_SOURCES = tests/test_api.c tests/harness.h
tests_test_api_CFLAGS = $(hakmem_test_cflags)
tests_test_api_LDFLAGS = $(hakmem_test_ldflags)
tests_test_api_LDADD = src/libhakmem.la

tests_test_foreign_SOURCES = tests/test_foreign.c tests/harness.h
tests_test_foreign_CFLAGS = $(hakmem_test_cflags)
tests_test_foreign_LDFLAGS = $(hakmem_test_ldflags)
tests_test_foreign_LDADD = src/libhakmem.la

tests_test_threads_SOURCES = tests/test_threads.c tests/harness.h
tests_test_threads_CFLAGS = $(hakmem_test_cflags)
tests_test_threads_LDFLAGS = $(hakmem_test_ldflags)
tests_test_threads_LDADD = src/libhakmem.la

tests_test_remote_free_SOURCES = tests/test_remote_free.c tests/harness.h
tests_test_remote_free_CFLAGS = $(hakmem_test_cflags)
tests_test_remote_free_LDFLAGS = $(hakmem_test_ldflags)
tests_test_remote_free_LDADD = src/libhakmem.la

tests_test_thread_churn_SOURCES = tests/test_thread_churn.c tests/harness.h
tests_test_thread_churn_CFLAGS = $(hakmem_test_cflags)
tests_test_thread_churn_LDFLAGS = $(hakmem_test_ldflags)
tests_test_thread_churn_LDADD = src/libhakmem.la

tests_test_fork_SOURCES = tests/test_fork.c tests/harness.h
tests_test_fork_CFLAGS = $(hakmem_test_cflags)
tests_test_fork_LDFLAGS = $(hakmem_test_ldflags)
tests_test_fork_LDADD = src/libhakmem.la

tests_test_fork_in_handler_SOURCES = tests/test_fork_in_handler.c tests/harness.h
tests_test_fork_in_handler_CFLAGS = $(hakmem_test_cflags)
tests_test_fork_in_handler_LDFLAGS = $(hakmem_test_ldflags)
tests_test_fork_in_handler_LDADD = src/libhakmem.la

tests_test_fork_stdio_SOURCES = tests/test_fork_stdio.c tests/harness.h
tests_test_fork_stdio_CFLAGS = $(hakmem_test_cflags)
tests_test_fork_stdio_LDFLAGS = $(hakmem_test_ldflags)
tests_test_fork_stdio_LDADD = src/libhakmem.la

tests_test_oom_SOURCES = tests/test_oom.c tests/harness.h
tests_test_oom_CFLAGS = $(hakmem_test_cflags)
tests_test_oom_LDFLAGS = $(hakmem_test_ldflags)
tests_test_oom_LDADD = src/libhakmem.la

tests_test_release_SOURCES = tests/test_release.c tests/harness.h
tests_test_release_CFLAGS = $(hakmem_test_cflags)
tests_test_release_LDFLAGS = $(hakmem_test_ldflags)
tests_test_release_LDADD = src/libhakmem.la

tests_test_page_telemetry_SOURCES = tests/test_page_telemetry.c tests/harness.h
tests_test_page_telemetry_CFLAGS = $(hakmem_test_cflags)
tests_test_page_telemetry_LDFLAGS = $(hakmem_test_ldflags)
tests_test_page_telemetry_LDADD = src/libhakmem.la

tests_test_realloc_checked_SOURCES = tests/test_realloc_checked.c tests/harness.h
tests_test_realloc_checked_CFLAGS = $(hakmem_test_cflags)
tests_test_realloc_checked_LDFLAGS = $(hakmem_test_ldflags)
tests_test_realloc_checked_LDADD = src/libhakmem.la
tests_test_realloc_growth_SOURCES = tests/test_realloc_growth.c tests/harness.h
tests_test_realloc_growth_CFLAGS = $(hakmem_test_cflags)
tests_test_realloc_growth_LDFLAGS = $(hakmem_test_ldflags)
tests_test_realloc_growth_LDADD = src/libhakmem.la
tests_test_large_split_SOURCES = tests/test_large_split.c tests/harness.h
tests_test_large_split_CFLAGS = $(hakmem_test_cflags)
tests_test_large_split_LDFLAGS = $(hakmem_test_ldflags)
tests_test_large_split_LDADD = src/libhakmem.la
tests_test_large_colour_SOURCES = tests/test_large_colour.c tests/harness.h
tests_test_large_colour_CFLAGS = $(hakmem_test_cflags)
tests_test_large_colour_LDFLAGS = $(hakmem_test_ldflags)
tests_test_large_colour_LDADD = src/libhakmem.la
tests_test_large_reuse_SOURCES = tests/test_large_reuse.c tests/harness.h
tests_test_large_reuse_CFLAGS = $(hakmem_test_cflags)
tests_test_large_reuse_LDFLAGS = $(hakmem_test_ldflags)
tests_test_large_reuse_LDADD = src/libhakmem.la

tests_test_misuse_SOURCES = tests/test_misuse.c tests/harness.h
tests_test_misuse_CFLAGS = $(hakmem_test_cflags)
tests_test_misuse_LDFLAGS = $(hakmem_test_ldflags)
tests_test_misuse_LDADD = src/libhakmem.la

tests_test_calloc_SOURCES = tests/test_calloc.c tests/harness.h
tests_test_calloc_CFLAGS = $(hakmem_test_cflags)
tests_test_calloc_LDFLAGS = $(hakmem_test_ldflags)
tests_test_calloc_LDADD = src/libhakmem.la
tests_test_trim_SOURCES = tests/test_trim.c tests/harness.h
tests_test_trim_CFLAGS = $(hakmem_test_cflags)
tests_test_trim_LDFLAGS = $(hakmem_test_ldflags)
tests_test_trim_LDADD = src/libhakmem.la

tests_test_glibc_ext_SOURCES = tests/test_glibc_ext.c tests/harness.h
tests_test_glibc_ext_CFLAGS = $(hakmem_test_cflags)
tests_test_glibc_ext_LDFLAGS = $(hakmem_test_ldflags)
tests_test_glibc_ext_LDADD = src/libhakmem.la

# C++, linked with libhakmem, whose operators new and delete it tests.
tests_test_cxx_operators_SOURCES = tests/test_cxx_operators.cc tests/cxx_check.h
tests_test_cxx_operators_CXXFLAGS = $(AM_CXXFLAGS) $(PTHREAD_CFLAGS)
tests_test_cxx_operators_LDFLAGS = -no-install $(PTHREAD_LIBS)
tests_test_cxx_operators_LDADD = src/libhakmem.la -ldl

# C++, linked with libhakmem, replacing only operator new(size_t) and
# operator delete(void *): hakmem's other forms must forward to them.  Also
# run by test_cxx_preload.sh at HAKMEM_HARDEN=2.
tests_cxx_replaced_new_SOURCES = tests/cxx_replaced_new.cc tests/cxx_check.h
tests_cxx_replaced_new_CXXFLAGS = $(AM_CXXFLAGS) $(PTHREAD_CFLAGS)
tests_cxx_replaced_new_LDFLAGS = -no-install $(PTHREAD_LIBS)
tests_cxx_replaced_new_LDADD = src/libhakmem.la -ldl

# Run by test_cxx_preload.sh with hakmem preloaded: a C program that
# dlopens a C++ plugin, whose failing new must throw std::bad_alloc.
check_PROGRAMS += tests/cxx_plugin_host
tests_cxx_plugin_host_SOURCES = tests/cxx_plugin_host.c
tests_cxx_plugin_host_LDADD = $(DL_LIBS)
check_LTLIBRARIES += tests/cxx_plugin.la
tests_cxx_plugin_la_SOURCES = tests/cxx_plugin.cc
tests_cxx_plugin_la_LDFLAGS = -module -avoid-version -shared -rpath /nowhere

# Run by test_preload.sh with and without hakmem preloaded, so it links only
# the C++ runtime.
tests_cxx_map_threads_SOURCES = tests/cxx_map_threads.cc
tests_cxx_map_threads_CXXFLAGS = $(AM_CXXFLAGS) $(PTHREAD_CFLAGS)
tests_cxx_map_threads_LDADD = $(PTHREAD_LIBS)

# The heap-fault suite, run by test_heap_faults.sh under glibc and under
# hakmem preloaded, so they link only libc and the C++ runtime, and built
# with -fno-builtin, which keeps the compiler from dropping the allocations
# that carry the program on after a fault.
check_PROGRAMS += tests/heap_faults tests/heap_faults_cxx
tests_heap_faults_SOURCES = tests/heap_faults.c tests/heap_faults.h
tests_heap_faults_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -fno-builtin
tests_heap_faults_LDADD = $(PTHREAD_LIBS)
tests_heap_faults_cxx_SOURCES = tests/heap_faults_cxx.cc tests/heap_faults.h
tests_heap_faults_cxx_CXXFLAGS = $(AM_CXXFLAGS) -fno-builtin
