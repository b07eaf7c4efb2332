/* TEST_OPAQUE: a function the compiler may neither inline nor see into
 * from its callers, so that a test's deliberate fault stays in the code.
 * GCC's noipa; clang has no such attribute, and noinline with optnone is
 * the nearest. */
#ifndef HAKMEM_TESTS_OPAQUE_H
#define HAKMEM_TESTS_OPAQUE_H

#if defined(__clang__)
#define TEST_OPAQUE __attribute__((noinline, optnone))
#else
#define TEST_OPAQUE __attribute__((noipa))
#endif

#endif
