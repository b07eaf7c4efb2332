/* The statistics' stripes (stats.h): what threads add in their stripes,
 * more threads than there are stripes, sums whole; a gauge one thread puts
 * on and another takes off sums to nothing; and a gauge caught below zero
 * reads 0, not 2^64 less a little. */
#include "stats.h"
#include "thread_ordinal.h"
#include "unit.h"

#define THREADS (2 * HAK_STAT_STRIPES + 3)

/* Counters nothing in this program moves but the test: the HotSpanBox's
 * budget growths, the L25 page counts and hak_malloc_onnode's gauge. */
#define COUNTER HAK_STAT_HOT_BUDGET_GROWTHS
#define BUCKET HAK_PAGES_L25
#define GAUGE HAK_STAT_NODE_BLOCK_BYTES

static void *add(void *arg)
{
    (void)arg;
    hak_stat_add(COUNTER, 3);
    hak_stat_pages_out(BUCKET, 2, 5);
    hak_stat_gauge(GAUGE, 100);
    return NULL;
}

static void *take_off(void *arg)
{
    (void)arg;
    hak_stat_gauge(GAUGE, -100);
    return NULL;
}

static void run_threads(void *(*body)(void *))
{
    pthread_t threads[THREADS];
    for (unsigned i = 0; i < THREADS; i++)
        unit_thread_start(&threads[i], body, NULL);
    for (unsigned i = 0; i < THREADS; i++)
        unit_thread_join(threads[i]);
}

/* Before any other thread: the readers sum only the stripes taken. */
static void test_one_thread(void)
{
    uint64_t counter = hak_stat_read(COUNTER);
    hak_stat_add(COUNTER, 7);
    CHECK(hak_thread_ordinals_given() < HAK_STAT_STRIPES, "%u ordinals given before any thread",
          hak_thread_ordinals_given());
    CHECK(hak_stat_read(COUNTER) - counter == 7, "one thread added 7: %llu",
          (unsigned long long)(hak_stat_read(COUNTER) - counter));
}

static void test_sums(void)
{
    uint64_t counter = hak_stat_read(COUNTER);
    struct hak_page_counts_now pages = hak_stat_read_pages(BUCKET);
    uint64_t gauge = hak_stat_read(GAUGE);
    run_threads(add);
    CHECK(hak_thread_ordinals_given() >= THREADS, "%u ordinals given for %u threads",
          hak_thread_ordinals_given(), THREADS);
    CHECK(hak_stat_read(COUNTER) - counter == 3 * THREADS, "%u threads added 3 each: %llu", THREADS,
          (unsigned long long)(hak_stat_read(COUNTER) - counter));
    struct hak_page_counts_now now = hak_stat_read_pages(BUCKET);
    CHECK(now.first - pages.first == 2 * THREADS && now.reused - pages.reused == 5 * THREADS,
          "%u threads gave out 2 first-touched and 5 reused pages each: %llu and %llu", THREADS,
          (unsigned long long)(now.first - pages.first),
          (unsigned long long)(now.reused - pages.reused));
    CHECK(hak_stat_read(GAUGE) - gauge == 100 * THREADS, "%u threads put 100 on a gauge: %llu",
          THREADS, (unsigned long long)(hak_stat_read(GAUGE) - gauge));
    /* Other threads take it all off, their ordinals THREADS on, so that
     * the stripes' shares differ (THREADS is no multiple of the stripes)
     * and some go below zero. */
    run_threads(take_off);
    CHECK(hak_stat_read(GAUGE) == gauge, "a gauge put on and taken off reads %llu, was %llu",
          (unsigned long long)hak_stat_read(GAUGE), (unsigned long long)gauge);
}

static void test_gauge_below_zero(void)
{
    uint64_t gauge = hak_stat_read(GAUGE);
    hak_stat_gauge(GAUGE, -(int64_t)gauge - 1);
    CHECK(hak_stat_read(GAUGE) == 0, "a gauge caught below zero reads %llu",
          (unsigned long long)hak_stat_read(GAUGE));
    hak_stat_gauge(GAUGE, (int64_t)gauge + 1);
    CHECK(hak_stat_read(GAUGE) == gauge, "the gauge put back reads %llu, was %llu",
          (unsigned long long)hak_stat_read(GAUGE), (unsigned long long)gauge);
}

int main(void)
{
    unit_watchdog();
    test_one_thread();
    test_sums();
    test_gauge_below_zero();
    return test_result("test_stats");
}
