# Reliability: the API and stress tests once more against a build of hakmem
# with AddressSanitizer and UBSan, memcheck over the stress programs, a fuzz
# target for the whole API with its corpus, larson-style and thread-teardown
# stress, and real programs run with hakmem preloaded.

# --- The sanitizer build -------------------------------------------------
# The sanitizer runtime brings its own malloc, and the dynamic loader calls
# malloc before that runtime has mapped its shadow memory.  An instrumented
# malloc defined in the program itself (hakmem exports the standard names as
# aliases) would win and crash there, so the archive the programs link keeps
# the standard names local: only the hak_ names reach hakmem, as in a
# program that uses hakmem side by side with another malloc.
reliability_sanitize = -fsanitize=address,undefined -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
RELIABILITY_OBJCOPY = objcopy

check_LIBRARIES = tests/reliability/libhakmem_sanitized.a
tests_reliability_libhakmem_sanitized_a_SOURCES = $(src_libhakmem_la_SOURCES)
tests_reliability_libhakmem_sanitized_a_CPPFLAGS = $(src_libhakmem_la_CPPFLAGS)
tests_reliability_libhakmem_sanitized_a_CFLAGS = $(AM_CFLAGS) $(HAKMEM_CFLAGS) \
	$(reliability_sanitize)

# The names the library exports besides hak_*, read from its version script.
tests/reliability/standard_names.txt: $(top_srcdir)/src/hakmem.map
	$(AM_V_GEN)$(AWK) '/global:/ { exported = 1; next } /local:/ { exported = 0 } \
	    exported { gsub(/;/, " "); for (i = 1; i <= NF; i++) if ($$i !~ /\*/) print $$i }' \
	    $(top_srcdir)/src/hakmem.map >$@.tmp && test -s $@.tmp && mv $@.tmp $@

# Refuses an archive the compiler did not instrument, which would make the
# sanitized tests pass without checking anything.
tests/reliability/libhakmem_hak_only.a: tests/reliability/libhakmem_sanitized.a \
		tests/reliability/standard_names.txt
	$(AM_V_GEN)nm tests/reliability/libhakmem_sanitized.a | grep -q __asan_report && \
	    nm tests/reliability/libhakmem_sanitized.a | grep -q __ubsan_handle && \
	    $(RELIABILITY_OBJCOPY) --localize-symbols=tests/reliability/standard_names.txt \
	        tests/reliability/libhakmem_sanitized.a $@

reliability_sanitized_cflags = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -fno-builtin \
	$(reliability_sanitize)
# The shared tests call the standard names; hak_names.h renames them.
reliability_renamed_cflags = $(reliability_sanitized_cflags) \
	-include $(top_srcdir)/tests/reliability/hak_names.h
reliability_sanitized_ldadd = tests/reliability/libhakmem_hak_only.a \
	$(src_libhakmem_la_LIBADD) $(PTHREAD_LIBS)
reliability_sanitized_sources = tests/reliability/sanitizer_options.c

# test_oom is left out: it caps the address space, where the sanitizer's
# shadow memory lives.  test_fork is left out too: GCC 12's AddressSanitizer
# runtime does not take its own allocator's lock around fork, so a child of
# a parent whose threads are inside the runtime can block on that lock for
# good (seen about once in 25 runs on a loaded machine, with the child stuck
# in the runtime, not in hakmem).  test_fork itself, at every hardening
# level (test_harden_levels.sh), covers hakmem's fork handling.
reliability_sanitized_tests = \
	tests/reliability/sanitizer_selftest \
	tests/reliability/sanitized_test_api \
	tests/reliability/sanitized_test_foreign \
	tests/reliability/sanitized_test_threads \
	tests/reliability/sanitized_test_remote_free \
	tests/reliability/sanitized_test_thread_churn \
	tests/reliability/sanitized_test_release \
	tests/reliability/sanitized_larson \
	tests/reliability/sanitized_teardown_stress

tests_reliability_sanitizer_selftest_SOURCES = tests/reliability/sanitizer_selftest.c tests/opaque.h \
	$(reliability_sanitized_sources)
tests_reliability_sanitizer_selftest_CFLAGS = $(reliability_sanitized_cflags)
tests_reliability_sanitizer_selftest_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_api_SOURCES = tests/test_api.c $(reliability_sanitized_sources)
tests_reliability_sanitized_test_api_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_api_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_foreign_SOURCES = tests/test_foreign.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_test_foreign_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_foreign_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_threads_SOURCES = tests/test_threads.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_test_threads_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_threads_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_remote_free_SOURCES = tests/test_remote_free.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_test_remote_free_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_remote_free_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_thread_churn_SOURCES = tests/test_thread_churn.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_test_thread_churn_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_thread_churn_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_test_release_SOURCES = tests/test_release.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_test_release_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_test_release_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_larson_SOURCES = tests/reliability/larson.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_larson_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_larson_LDADD = $(reliability_sanitized_ldadd)

tests_reliability_sanitized_teardown_stress_SOURCES = tests/reliability/teardown_stress.c \
	$(reliability_sanitized_sources)
tests_reliability_sanitized_teardown_stress_CFLAGS = $(reliability_renamed_cflags)
tests_reliability_sanitized_teardown_stress_LDADD = $(reliability_sanitized_ldadd)

# The fuzz target's driver for gcc, with the sanitizers; fuzz_replay.sh runs it.
tests_reliability_sanitized_fuzz_replay_SOURCES = tests/reliability/fuzz_replay.c \
	tests/reliability/fuzz_api.c $(reliability_sanitized_sources)
tests_reliability_sanitized_fuzz_replay_CFLAGS = $(reliability_sanitized_cflags)
tests_reliability_sanitized_fuzz_replay_LDADD = $(reliability_sanitized_ldadd)

# --- Programs on the regular library -------------------------------------
reliability_cflags = $(AM_CFLAGS) $(PTHREAD_CFLAGS) -fno-builtin
# -no-install: a real executable, which valgrind can run directly.
reliability_ldflags = -no-install $(PTHREAD_LIBS)

reliability_hakmem_tests = tests/reliability/larson tests/reliability/teardown_stress

tests_reliability_larson_SOURCES = tests/reliability/larson.c
tests_reliability_larson_CFLAGS = $(reliability_cflags)
tests_reliability_larson_LDFLAGS = $(reliability_ldflags)
tests_reliability_larson_LDADD = src/libhakmem.la

tests_reliability_teardown_stress_SOURCES = tests/reliability/teardown_stress.c
tests_reliability_teardown_stress_CFLAGS = $(reliability_cflags)
tests_reliability_teardown_stress_LDFLAGS = $(reliability_ldflags)
tests_reliability_teardown_stress_LDADD = src/libhakmem.la

# The fuzz target on the optimised library, as programs get it.
tests_reliability_fuzz_replay_SOURCES = tests/reliability/fuzz_replay.c \
	tests/reliability/fuzz_api.c
tests_reliability_fuzz_replay_CFLAGS = $(reliability_cflags)
tests_reliability_fuzz_replay_LDFLAGS = $(reliability_ldflags)
tests_reliability_fuzz_replay_LDADD = src/libhakmem.la

# Links no allocator: valgrind_stress.sh preloads hakmem or not.  Its leak
# must stay in the program (-fno-builtin).
tests_reliability_memcheck_canary_SOURCES = tests/reliability/memcheck_canary.c tests/opaque.h
tests_reliability_memcheck_canary_CFLAGS = $(AM_CFLAGS) -fno-builtin

# What fuzz_libfuzzer.sh needs to build hakmem with clang: the sources and
# flags of src/local.mk, with paths relative to the top build folder.
tests/reliability/build-settings.sh: Makefile
	$(AM_V_GEN){ \
	    echo '# Generated by make from tests/reliability/local.mk.'; \
	    printf "hakmem_sources='"; \
	    for source in $(src_libhakmem_la_SOURCES); do \
	        case $$source in *.c) printf ' %s' "$(srcdir)/$$source" ;; esac; \
	    done; \
	    echo "'"; \
	    echo "hakmem_cppflags='$(src_libhakmem_la_CPPFLAGS)'"; \
	    echo "hakmem_cflags='$(HAKMEM_CFLAGS)'"; \
	    echo "hakmem_libs='$(src_libhakmem_la_LIBADD) $(PTHREAD_LIBS)'"; \
	} >$@.tmp && mv $@.tmp $@

reliability_scripts = \
	tests/reliability/fuzz_replay.sh \
	tests/reliability/fuzz_libfuzzer.sh \
	tests/reliability/valgrind_stress.sh \
	tests/reliability/real_programs.sh

check_PROGRAMS += $(reliability_sanitized_tests) $(reliability_hakmem_tests) \
	tests/reliability/sanitized_fuzz_replay tests/reliability/fuzz_replay \
	tests/reliability/memcheck_canary
check_SCRIPTS += tests/reliability/build-settings.sh
TESTS += $(reliability_sanitized_tests) $(reliability_hakmem_tests) $(reliability_scripts)
EXTRA_DIST += $(reliability_scripts) tests/reliability/hak_names.h tests/reliability/stress.h \
	tests/reliability/make_corpus.py tests/reliability/corpus
CLEANFILES += tests/reliability/standard_names.txt tests/reliability/libhakmem_hak_only.a \
	tests/reliability/build-settings.sh

# fuzz_libfuzzer.sh's work directories (objects, the grown corpus, logs,
# crash artifacts): whole directories, which CLEANFILES cannot remove.
clean-local: clean-reliability-fuzz
clean-reliability-fuzz:
	-rm -rf tests/reliability/libfuzzer tests/reliability/fuzz-artifacts
.PHONY: clean-reliability-fuzz
