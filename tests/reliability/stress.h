/* What the reliability stress tests share: their duration, and the check
 * that memory stays bounded once the workload has reached its steady state.
 */
#ifndef HAKMEM_TESTS_RELIABILITY_STRESS_H
#define HAKMEM_TESTS_RELIABILITY_STRESS_H

#include <malloc.h>
#include <stdlib.h>

#include "../harness.h"

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ADDRESS_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ADDRESS_SANITIZER 1
#endif
#endif
#ifndef UNDER_ADDRESS_SANITIZER
#define UNDER_ADDRESS_SANITIZER 0
#endif

/* The run's length in seconds: HAKMEM_STRESS_SECONDS when set (valgrind
 * runs ask for less), else default_seconds. */
static inline double stress_seconds(double default_seconds)
{
    const char *text = getenv("HAKMEM_STRESS_SECONDS");
    char *end;

    if (text == NULL || *text == '\0') {
        return default_seconds;
    }
    double seconds = strtod(text, &end);
    if (*end != '\0' || !(seconds > 0)) {
        hard_error("HAKMEM_STRESS_SECONDS=%s is not a positive number of seconds", text);
    }
    return seconds;
}

/* Memory must stay bounded: after the first quarter of a run, the steady
 * state, the resident set may exceed the baseline set then by half and a
 * slack, and by what the live data grew since (threads that fall behind on
 * a loaded machine hold several times the usual blocks: 148 MiB live once,
 * against 30 at the warm-up, under a parallel make check), and at no time
 * exceed what the allocator can need for the live data (a factor for
 * size-class rounding and per-thread caches, plus the slack) beyond what it
 * says it keeps for reuse (mallinfo2's keepcost: hakmem's freed spans and
 * cached large blocks, under budgets of their own that grow with the
 * program's demand: 32 MiB per HotSpanBox shard at first, four shards a
 * node).  Live data can fall to 14 MiB while the kept spans stay resident
 * (a fresh clone's check, 116 MiB resident); the growth bound still
 * catches kept memory that grows past the warm-up.  Valgrind and the
 * sanitizers keep their own books in the same process, so their runs only
 * verify the data, and do not ask mallinfo2, which is glibc's in the
 * sanitized builds. */
#define RSS_SLACK (64 * MiB)
#define RSS_PER_LIVE_BYTE 3
#define RSS_WARMUP_FRACTION 0.25

struct rss_watch {
    size_t baseline;
    size_t baseline_live; /* the most live data until the warm-up */
    size_t peak;
    size_t peak_unkept; /* the most RSS beyond what the allocator keeps */
    size_t peak_live;
    size_t samples;
    int warmed_up;
};

static inline int rss_is_meaningful(void)
{
    return !under_valgrind() && !UNDER_ADDRESS_SANITIZER;
}

/* elapsed_fraction: how much of the run is over, from 0 to 1; live: the
 * bytes the test holds now. */
static inline void rss_watch_sample(struct rss_watch *watch, double elapsed_fraction, size_t live)
{
    size_t rss = rss_bytes();
    struct mallinfo2 info = {0};
    if (rss_is_meaningful()) {
        info = mallinfo2();
    }
    size_t unkept = rss > info.keepcost ? rss - info.keepcost : 0;

    if (getenv("HAKMEM_STRESS_TRACE") != NULL) {
        printf("%.2f: RSS %zu MiB, kept for reuse %zu, in use %zu, cached by threads %zu, "
               "live %zu MiB\n",
               elapsed_fraction, rss / MiB, info.keepcost / MiB, info.uordblks / MiB,
               info.fsmblks / MiB, live / MiB);
    }
    if (live > watch->peak_live) {
        watch->peak_live = live;
    }
    if (!watch->warmed_up) {
        if (elapsed_fraction >= RSS_WARMUP_FRACTION) {
            watch->baseline = rss;
            watch->baseline_live = watch->peak_live;
            watch->peak = rss;
            watch->peak_unkept = unkept;
            watch->warmed_up = 1;
        }
        return;
    }
    watch->samples++;
    if (rss > watch->peak) {
        watch->peak = rss;
    }
    if (unkept > watch->peak_unkept) {
        watch->peak_unkept = unkept;
    }
}

static inline void rss_watch_check(const struct rss_watch *watch, const char *name)
{
    if (!rss_is_meaningful()) {
        printf("%s: RSS not checked under valgrind or a sanitizer\n", name);
        return;
    }
    if (!watch->warmed_up || watch->samples == 0) {
        hard_error("%s: the run ended before RSS was sampled", name);
    }
    size_t live_growth =
        watch->peak_live > watch->baseline_live ? watch->peak_live - watch->baseline_live : 0;
    size_t growth_bound = watch->baseline + watch->baseline / 2 + RSS_SLACK + live_growth;
    size_t live_bound = RSS_PER_LIVE_BYTE * watch->peak_live + RSS_SLACK;
    printf("%s: RSS %zu MiB after warm-up, peak %zu MiB after it (%zu beyond what the "
           "allocator kept for reuse), for at most %zu MiB live (bounds %zu and %zu MiB)\n",
           name, watch->baseline / MiB, watch->peak / MiB, watch->peak_unkept / MiB,
           watch->peak_live / MiB, growth_bound / MiB, live_bound / MiB);
    CHECK(watch->peak <= growth_bound,
          "%s: RSS grew from %zu MiB after warm-up to %zu MiB: memory is not reused", name,
          watch->baseline / MiB, watch->peak / MiB);
    CHECK(watch->peak_unkept <= live_bound,
          "%s: RSS reached %zu MiB beyond what the allocator kept for reuse, for at most %zu MiB "
          "of live data",
          name, watch->peak_unkept / MiB, watch->peak_live / MiB);
}

#endif
