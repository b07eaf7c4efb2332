# The NUMA suite runs in QEMU guests with emulated nodes (tools/numa-vm), one
# boot per machine shape, so it has its own target rather than joining `make
# check`: `make check-numa`.  Its tests are the guest_*.sh scripts that
# tests/numa/run-suite.sh finds; numa_smoke, numa_home, large_churn and
# phase_churn link only the C library, so that the malloc they exercise is whichever LD_PRELOAD names
# (numa_home finds hakmem's API with dlsym).
check_PROGRAMS += tests/numa/numa_smoke tests/numa/numa_home tests/numa/large_churn \
	tests/numa/phase_churn
tests_numa_numa_smoke_SOURCES = tests/numa/numa_smoke.c tests/numa/numa_util.h
tests_numa_numa_smoke_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_numa_numa_smoke_LDADD = $(PTHREAD_LIBS)
tests_numa_numa_home_SOURCES = tests/numa/numa_home.c tests/numa/numa_util.h
tests_numa_numa_home_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_numa_numa_home_LDADD = $(PTHREAD_LIBS)
tests_numa_large_churn_SOURCES = tests/numa/large_churn.c
tests_numa_phase_churn_SOURCES = tests/numa/phase_churn.c

NUMA_GUEST_TESTS = \
	tests/numa/guest_cpuset.sh \
	tests/numa/guest_early.sh \
	tests/numa/guest_first_touch.sh \
	tests/numa/guest_hakmem_numactl.sh \
	tests/numa/guest_large_churn.sh \
	tests/numa/guest_lend.sh \
	tests/numa/guest_membind.sh \
	tests/numa/guest_migrate.sh \
	tests/numa/guest_migrate_libnuma.sh \
	tests/numa/guest_migrate_norseq.sh \
	tests/numa/guest_migrate_other.sh \
	tests/numa/guest_migrate_syscall.sh \
	tests/numa/guest_nodes.sh \
	tests/numa/guest_onnode.sh \
	tests/numa/guest_placement.sh \
	tests/numa/guest_remote_free.sh \
	tests/numa/guest_topology.sh
EXTRA_DIST += tools/numa-vm tests/numa/check-numa.sh tests/numa/run-suite.sh \
	$(NUMA_GUEST_TESTS) tests/numa/test_numa_locality.sh

# bench/numa_locality on this machine (one node here): its output and its
# local shares, under glibc and hakmem.
TESTS += tests/numa/test_numa_locality.sh
CLEANFILES += tests/numa/test-suite.log

# Machine shapes to boot guests of (tools/numa-vm --list-shapes), and the
# seconds each guest may take.
NUMA_SHAPES = pkg-per-node-2 snc-2 pkgs-2-per-node smt cxl no-hwloc uneven sparse 4-nodes \
	8-nodes
NUMA_GUEST_TIMEOUT = 300

check-numa: tests/numa/numa_smoke tests/numa/numa_home tests/numa/large_churn \
	tests/numa/phase_churn tests/unit/test_lend tests/hwloc_probe $(lib_LTLIBRARIES)
	$(SHELL) $(srcdir)/tests/numa/check-numa.sh --builddir "$(abs_top_builddir)" \
	    --shapes "$(NUMA_SHAPES)" --timeout "$(NUMA_GUEST_TIMEOUT)" \
	    --hakmem-lib "$(abs_top_builddir)/src/.libs/libhakmem.so" \
	    --log tests/numa/test-suite.log

.PHONY: check-numa
