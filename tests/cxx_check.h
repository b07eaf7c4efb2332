// CHECK for the C++ tests, which cannot include harness.h (C11 atomics):
// records a failure with its message and carries on.
#ifndef HAKMEM_TESTS_CXX_CHECK_H
#define HAKMEM_TESTS_CXX_CHECK_H

#include <cstdio>

static int failures;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            std::fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                              \
            std::fprintf(stderr, __VA_ARGS__);                                                     \
            std::fputc('\n', stderr);                                                              \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

#endif
