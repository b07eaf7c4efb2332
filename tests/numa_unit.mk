# The topology layer (src/numa) on the build machine.  test_topology
# compiles the numa sources in, because the library hides their symbols;
# it covers hwloc synthetic machines and this machine against sysfs.
# test_hwloc_lazy.sh checks that a preloaded process maps hwloc only when
# there are several nodes (it needs AM_TESTS_ENVIRONMENT and the .sh log
# compiler from tests/local.mk).

check_PROGRAMS += tests/test_topology tests/test_topology_shapes tests/hwloc_probe
TESTS += tests/test_topology tests/test_topology_shapes tests/test_hwloc_lazy.sh
EXTRA_DIST += tests/test_hwloc_lazy.sh

tests_test_topology_SOURCES = tests/test_topology.c tests/harness.h \
	src/numa/cpu.h \
	src/numa/hwloc_api.c src/numa/hwloc_api.h \
	src/numa/node.c src/numa/node.h \
	src/numa/sysfs.c src/numa/sysfs.h \
	src/numa/topology.c src/numa/topology.h \
	src/numa/topology_hwloc.c src/numa/topology_hwloc.h \
	src/fork_locks.c src/fork_locks.h \
	src/os.c src/os.h src/print.c src/print.h \
	src/stats.c src/stats.h src/thread_ordinal.c src/thread_ordinal.h
tests_test_topology_CPPFLAGS = -D_GNU_SOURCE -I$(top_srcdir)/include -I$(top_builddir) \
	-I$(top_srcdir)/src $(HWLOC_CFLAGS)
tests_test_topology_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_test_topology_LDFLAGS = -no-install
tests_test_topology_LDADD = $(PTHREAD_LIBS) -ldl

# The map builder on fake sysfs trees of every server shape, through both
# sources (sysfs, and hwloc's Linux backend with HWLOC_FSROOT).
tests_test_topology_shapes_SOURCES = tests/test_topology_shapes.c tests/harness.h \
	src/numa/hwloc_api.c src/numa/hwloc_api.h \
	src/numa/sysfs.c src/numa/sysfs.h \
	src/numa/topology.c src/numa/topology.h \
	src/numa/topology_hwloc.c src/numa/topology_hwloc.h \
	src/fork_locks.c src/fork_locks.h \
	src/os.c src/os.h src/print.c src/print.h \
	src/stats.c src/stats.h src/thread_ordinal.c src/thread_ordinal.h
tests_test_topology_shapes_CPPFLAGS = $(tests_test_topology_CPPFLAGS)
tests_test_topology_shapes_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_test_topology_shapes_LDFLAGS = -no-install
tests_test_topology_shapes_LDADD = $(PTHREAD_LIBS) -ldl

# Links only the C library, so that LD_PRELOAD decides its malloc.
tests_hwloc_probe_SOURCES = tests/hwloc_probe.c
tests_hwloc_probe_CFLAGS = $(AM_CFLAGS) $(PTHREAD_CFLAGS)
tests_hwloc_probe_LDADD = $(PTHREAD_LIBS)
