# Benchmark programs.  They are linked against plain libc malloc: the
# allocator under test is chosen at run time with LD_PRELOAD (see
# tools/hakmem-compare, which starts every program through
# bench/rusage_run).  They are installed in $(pkglibexecdir) so that an
# installed hakmem-compare finds them.  -fno-builtin-* keeps the compiler
# from eliding or merging malloc/free pairs.
BENCHMARKS = bench/random_mixed bench/fixed_size bench/xthread bench/mid_large_mt \
	bench/l25 bench/realloc_grow bench/large_blocks bench/rusage_run bench/startup_threads \
	bench/batch_free bench/fork_churn bench/larson bench/cxx_churn bench/calloc_tables \
	bench/aligned bench/mid_batch bench/cache_scratch bench/phases bench/realloc_inplace
pkglibexec_PROGRAMS = $(BENCHMARKS)

BENCH_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -O2 -fno-builtin-malloc -fno-builtin-free \
	-fno-builtin-calloc -fno-builtin-realloc
BENCH_LIBS = $(PTHREAD_LIBS)

bench_random_mixed_SOURCES = bench/random_mixed.c bench/bench_util.h
bench_random_mixed_CFLAGS = $(BENCH_CFLAGS)
bench_fixed_size_SOURCES = bench/fixed_size.c bench/bench_util.h
bench_fixed_size_CFLAGS = $(BENCH_CFLAGS)
bench_xthread_SOURCES = bench/xthread.c bench/bench_util.h
bench_xthread_CFLAGS = $(BENCH_CFLAGS)
bench_xthread_LDADD = $(BENCH_LIBS)
bench_mid_large_mt_SOURCES = bench/mid_large_mt.c bench/slot_threads.h bench/bench_util.h
bench_mid_large_mt_CFLAGS = $(BENCH_CFLAGS)
bench_mid_large_mt_LDADD = $(BENCH_LIBS)
bench_l25_SOURCES = bench/l25.c bench/slot_threads.h bench/bench_util.h
bench_l25_CFLAGS = $(BENCH_CFLAGS)
bench_l25_LDADD = $(BENCH_LIBS)
bench_realloc_grow_SOURCES = bench/realloc_grow.c bench/bench_util.h
bench_realloc_grow_CFLAGS = $(BENCH_CFLAGS)
bench_realloc_inplace_SOURCES = bench/realloc_inplace.c bench/bench_util.h
bench_realloc_inplace_CFLAGS = $(BENCH_CFLAGS)
bench_cache_scratch_SOURCES = bench/cache_scratch.c bench/bench_util.h
bench_cache_scratch_CFLAGS = $(BENCH_CFLAGS)
bench_cache_scratch_LDADD = $(BENCH_LIBS)
bench_batch_free_SOURCES = bench/batch_free.c bench/bench_util.h
bench_batch_free_CFLAGS = $(BENCH_CFLAGS)
bench_fork_churn_SOURCES = bench/fork_churn.c bench/bench_util.h
bench_fork_churn_CFLAGS = $(BENCH_CFLAGS)
bench_fork_churn_LDADD = $(BENCH_LIBS)
bench_larson_SOURCES = bench/larson.c bench/bench_util.h
bench_larson_CFLAGS = $(BENCH_CFLAGS)
bench_larson_LDADD = $(BENCH_LIBS)
# C++: new and delete reach the allocator through its exported operators.
bench_cxx_churn_SOURCES = bench/cxx_churn.cc bench/bench_util.h
bench_cxx_churn_CXXFLAGS = $(AM_CXXFLAGS) $(PTHREAD_CFLAGS) -O2
bench_cxx_churn_LDADD = $(BENCH_LIBS)
bench_calloc_tables_SOURCES = bench/calloc_tables.c bench/bench_util.h
bench_calloc_tables_CFLAGS = $(BENCH_CFLAGS)
bench_mid_batch_SOURCES = bench/mid_batch.c bench/bench_util.h
bench_mid_batch_CFLAGS = $(BENCH_CFLAGS)
bench_aligned_SOURCES = bench/aligned.c bench/bench_util.h
bench_aligned_CFLAGS = $(BENCH_CFLAGS)
bench_phases_SOURCES = bench/phases.c bench/bench_util.h
bench_phases_CFLAGS = $(BENCH_CFLAGS)
bench_large_blocks_SOURCES = bench/large_blocks.c bench/bench_util.h
bench_large_blocks_CFLAGS = $(BENCH_CFLAGS)
bench_rusage_run_SOURCES = bench/rusage_run.c
bench_startup_threads_SOURCES = bench/startup_threads.c
bench_startup_threads_CFLAGS = $(BENCH_CFLAGS)
bench_startup_threads_LDADD = $(BENCH_LIBS)

# NUMA locality (issue 5); tools/hakmem-compare --numa runs it in the guest
# of tools/numa-vm.  It shares the tests' sysfs and move_pages helpers.
BENCHMARKS += bench/numa_locality
bench_numa_locality_SOURCES = bench/numa_locality.c bench/bench_util.h tests/numa/numa_util.h
bench_numa_locality_CFLAGS = $(BENCH_CFLAGS)
bench_numa_locality_LDADD = $(BENCH_LIBS)

# The comparison tool runs the programs above; it lives here rather than in
# tools/local.mk so that the two fragments are edited by one owner each.
# startup-bench is installed beside it: hakmem-compare loads it for its startup:* rows.
dist_bin_SCRIPTS = tools/hakmem-compare tools/startup-bench
TESTS += tests/test_bench_programs.sh tests/test_compare.sh tests/test_startup_bench.sh
EXTRA_DIST += tests/test_bench_programs.sh tests/test_compare.sh tests/test_startup_bench.sh
