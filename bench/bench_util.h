/* Shared helpers for the bench programs: argument parsing, timing and the
 * one-line report that tools/hakmem-compare reads.
 *
 * C and C++ programs include it.  The programs use plain libc malloc; the allocator under test is
 * chosen at run time with LD_PRELOAD, so nothing here may depend on hakmem.
 */
#ifndef HAKMEM_BENCH_UTIL_H
#define HAKMEM_BENCH_UTIL_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

struct bench_param {
    const char *name;
    long value;
    long min;
};

static inline void bench_usage(const char *program, const struct bench_param *params, size_t count)
{
    fprintf(stderr, "usage: %s", program);
    for (size_t i = 0; i < count; i++)
        fprintf(stderr, " [%s=%ld]", params[i].name, params[i].value);
    fprintf(stderr, "\n(arguments may also be given positionally, in this order)\n");
}

static inline int bench_parse_long(const char *text, long *out)
{
    char *end;

    errno = 0;
    long value = strtol(text, &end, 0);
    if (errno != 0 || end == text || *end != '\0')
        return -1;
    *out = value;
    return 0;
}

/* Accepts "name=value" in any order and bare values in declaration order, so
 * both `random_mixed ws=400` and `random_mixed 10000000 400` work. */
static inline void bench_parse_args(int argc, char **argv, struct bench_param *params, size_t count)
{
    size_t next_positional = 0;

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *equals = strchr(arg, '=');
        struct bench_param *target = NULL;
        const char *value_text = arg;

        if (strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0) {
            bench_usage(argv[0], params, count);
            exit(0);
        }
        if (equals != NULL) {
            size_t name_len = (size_t)(equals - arg);
            for (size_t j = 0; j < count; j++) {
                if (strlen(params[j].name) == name_len &&
                    strncmp(params[j].name, arg, name_len) == 0)
                    target = &params[j];
            }
            value_text = equals + 1;
        } else if (next_positional < count) {
            target = &params[next_positional++];
        }
        if (target == NULL) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], arg);
            bench_usage(argv[0], params, count);
            exit(2);
        }
        if (bench_parse_long(value_text, &target->value) != 0 || target->value < target->min) {
            fprintf(stderr, "%s: %s must be an integer >= %ld, got '%s'\n", argv[0], target->name,
                    target->min, value_text);
            exit(2);
        }
    }
}

static inline double bench_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void *bench_xmalloc(size_t size)
{
    void *block = malloc(size);

    if (block == NULL) {
        fprintf(stderr, "bench: malloc(%zu) failed\n", size);
        exit(1);
    }
    return block;
}

static inline void *bench_xcalloc(size_t count, size_t size)
{
    void *block = calloc(count, size);

    if (block == NULL) {
        fprintf(stderr, "bench: calloc(%zu, %zu) failed\n", count, size);
        exit(1);
    }
    return block;
}

static inline uint32_t bench_xorshift32(uint32_t *state)
{
    uint32_t x = *state;

    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    *state = x;
    return x;
}

/* A seed parameter as xorshift32's state: exits with status 2 where it is
 * 0 modulo 2^32, from which xorshift would never move. */
static inline uint32_t bench_seed(const char *program, long value)
{
    uint32_t seed = (uint32_t)value;
    if (seed == 0) {
        fprintf(stderr, "%s: seed must not be 0 modulo 2^32 (xorshift would stay at 0)\n", program);
        exit(2);
    }
    return seed;
}

/* Exits with status 2 when the parameter max is below min (a range of
 * sizes), naming both. */
static inline void bench_check_range(const char *program, const struct bench_param *min,
                                     const struct bench_param *max)
{
    if (max->value < min->value) {
        fprintf(stderr, "%s: %s must be at least %s\n", program, max->name, min->name);
        exit(2);
    }
}

/* Touches one byte in every page and the last byte, as a program filling the
 * block would, so that page faults are counted. */
static inline void bench_touch_pages(void *block, size_t size, unsigned char value)
{
    unsigned char *bytes = (unsigned char *)block;

    for (size_t offset = 0; offset < size; offset += 4096)
        bytes[offset] = value;
    bytes[size - 1] = value;
}

/* Prints `NAME ops_per_s=… ops=… seconds=… minflt=… maxrss_kb=…` followed by the
 * parameters, all on one line.  rusage is read after the timed region so the
 * counts cover the whole run; minflt also counts the children the program
 * waited for (bench/fork_churn's). */
static inline void bench_report(const char *name, double ops, double seconds,
                                const struct bench_param *params, size_t count)
{
    struct rusage usage, children;

    getrusage(RUSAGE_SELF, &usage);
    getrusage(RUSAGE_CHILDREN, &children);
    printf("%s ops_per_s=%.0f ops=%.0f seconds=%.6f minflt=%ld maxrss_kb=%ld", name,
           seconds > 0 ? ops / seconds : 0.0, ops, seconds, usage.ru_minflt + children.ru_minflt,
           usage.ru_maxrss);
    for (size_t i = 0; i < count; i++)
        printf(" %s=%ld", params[i].name, params[i].value);
    printf("\n");
    fflush(stdout);
}

#endif
