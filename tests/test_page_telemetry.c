/* Page telemetry: hakmem counts the pages it hands out as first touched
 * (fresh memory) or reused (still resident), per bucket, and HAKMEM_STATS=1
 * prints the counts beside the process's minor faults.
 *
 * A child run with 4 KiB pages only (HAKMEM_HUGE_PAGES=0) writes L25
 * blocks, frees them and writes them again, and a large block likewise.
 * The first pass must count fresh pages and fault about as many; the second
 * must count reused pages and fault none while the HotSpanBox keeps them
 * (HAKMEM_HOT_BYTES default), or fresh pages again once freeing decommits
 * them (HAKMEM_HOT_BYTES=0).  Minor faults never exceed the first-touched
 * pages by more than the process's own few.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "hakmem.h"

#define BLOCKS 16
#define L25_BLOCK (256 * KiB) /* a class size: exactly 64 pages */
#define L25_PAGES ((long)(L25_BLOCK / 4096))
#define LARGE_BLOCK (4 * MiB)
#define LARGE_PAGES ((long)(LARGE_BLOCK / 4096))
#define SMALL_BLOCKS 1000
/* Faults that are not hakmem's pages: the stack, libc, the report. */
#define SLACK 48

struct snapshot {
    long minflt;
    unsigned long first[5], reused[5]; /* C3, L25, LARGE, SSM, total */
};

static const char *const buckets[5] = {"C3", "L25", "LARGE", "SSM", "total"};

/* "NAME first reused" from the report's pages table. */
static void parse_bucket(const char *report, const char *name, unsigned long *first,
                         unsigned long *reused)
{
    char key[16];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *table = strstr(report, "\npages ");
    const char *line = table != NULL ? strstr(table, key) : NULL;
    if (line == NULL || sscanf(line + strlen(key), "%lu %lu", first, reused) != 2) {
        hard_error("no %s line in the pages table:\n%s", name, report);
    }
}

static void take(struct snapshot *s)
{
    static char report[32768];
    int fd = memfd_create("hakmem-stats", 0);
    if (fd < 0) {
        hard_error("memfd_create failed");
    }
    s->minflt = minor_faults();
    hak_stats_print(fd);
    ssize_t len = pread(fd, report, sizeof(report) - 1, 0);
    close(fd);
    if (len <= 0) {
        hard_error("hak_stats_print wrote nothing");
    }
    report[len] = 0;
    for (int i = 0; i < 5; i++) {
        parse_bucket(report, buckets[i], &s->first[i], &s->reused[i]);
    }
}

enum { C3, L25, LARGE, SSM, TOTAL };

static long first_delta(const struct snapshot *a, const struct snapshot *b, int i)
{
    return (long)(b->first[i] - a->first[i]);
}

static long reused_delta(const struct snapshot *a, const struct snapshot *b, int i)
{
    return (long)(b->reused[i] - a->reused[i]);
}

/* No more faults than first-touched pages, and, unless the kernel backs
 * anything with huge pages anyway, about one per page. */
static void check_faults(const char *pass, const struct snapshot *a, const struct snapshot *b,
                         long fresh, int thp_always)
{
    long faults = b->minflt - a->minflt;
    long first = first_delta(a, b, TOTAL);
    printf("%s: %ld minor faults, %ld pages first touched, %ld reused\n", pass, faults, first,
           reused_delta(a, b, TOTAL));
    CHECK(faults <= first + SLACK, "%s: %ld minor faults, but only %ld pages first touched", pass,
          faults, first);
    if (!thp_always) {
        CHECK(faults >= fresh * 9 / 10, "%s: %ld minor faults for %ld fresh pages", pass, faults,
              fresh);
    }
}

static void write_blocks(void **blocks)
{
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(opaque_size(L25_BLOCK));
        if (blocks[i] == NULL) {
            hard_error("malloc(%zu) failed", L25_BLOCK);
        }
        memset(blocks[i], i + 1, L25_BLOCK);
    }
}

static int child(int cold, int thp_always)
{
    static void *small[SMALL_BLOCKS];
    void *blocks[BLOCKS];
    struct snapshot s0, s1, s2, s3, s4, s5, s6;
    /* No spare SuperSlab of the start-up's small blocks to lend its pages
     * to the first span (arena/shared_pool.h), which would count them as
     * reused. */
    malloc_trim(0);
    take(&s0);
    take(&s0); /* the second: the report's own first faults are behind */

    write_blocks(blocks);
    take(&s1);
    CHECK(first_delta(&s0, &s1, L25) == BLOCKS * L25_PAGES,
          "first pass: %ld L25 pages first touched, want %ld", first_delta(&s0, &s1, L25),
          BLOCKS * L25_PAGES);
    CHECK(reused_delta(&s0, &s1, L25) == 0, "first pass: %ld L25 pages reused",
          reused_delta(&s0, &s1, L25));
    check_faults("L25 first pass", &s0, &s1, BLOCKS * L25_PAGES, thp_always);

    for (int i = 0; i < BLOCKS; i++) {
        free(blocks[i]);
    }
    take(&s2);
    write_blocks(blocks);
    take(&s3);
    /* HAKMEM_L25_RING=1: every freed span leaves the thread's cache but the
     * class's current one, which the first malloc takes without a carve. */
    long want = (BLOCKS - 1) * L25_PAGES;
    if (cold) {
        CHECK(first_delta(&s2, &s3, L25) >= want,
              "second pass, decommitted: %ld L25 pages first touched, want at least %ld",
              first_delta(&s2, &s3, L25), want);
        CHECK(reused_delta(&s2, &s3, L25) == 0, "second pass, decommitted: %ld L25 pages reused",
              reused_delta(&s2, &s3, L25));
        check_faults("L25 second pass, decommitted", &s2, &s3, want, thp_always);
    } else {
        CHECK(first_delta(&s2, &s3, L25) == 0,
              "second pass, hot: %ld L25 pages first touched, want 0", first_delta(&s2, &s3, L25));
        CHECK(reused_delta(&s2, &s3, L25) >= want,
              "second pass, hot: %ld L25 pages reused, want at least %ld",
              reused_delta(&s2, &s3, L25), want);
        check_faults("L25 second pass, hot", &s2, &s3, 0, thp_always);
        CHECK(s3.minflt - s2.minflt < L25_PAGES, "second pass, hot: %ld minor faults",
              s3.minflt - s2.minflt);
    }
    for (int i = 0; i < BLOCKS; i++) {
        free(blocks[i]);
    }

    take(&s4);
    char *large = malloc(opaque_size(LARGE_BLOCK));
    memset(large, 1, LARGE_BLOCK);
    free(large);
    take(&s5);
    large = malloc(opaque_size(LARGE_BLOCK));
    memset(large, 2, LARGE_BLOCK);
    take(&s6);
    free(large);
    CHECK(first_delta(&s4, &s5, LARGE) == LARGE_PAGES,
          "large block: %ld pages first touched, want %ld", first_delta(&s4, &s5, LARGE),
          LARGE_PAGES);
    CHECK(first_delta(&s4, &s5, SSM) >= 1, "large block: its head's page not counted");
    check_faults("large block", &s4, &s5, LARGE_PAGES, thp_always);
    if (cold) {
        CHECK(first_delta(&s5, &s6, LARGE) == LARGE_PAGES,
              "large block again, unmapped: %ld pages first touched, want %ld",
              first_delta(&s5, &s6, LARGE), LARGE_PAGES);
    } else {
        CHECK(first_delta(&s5, &s6, LARGE) == 0 && reused_delta(&s5, &s6, LARGE) == LARGE_PAGES,
              "large block again, cached: %ld first touched and %ld reused, want 0 and %ld",
              first_delta(&s5, &s6, LARGE), reused_delta(&s5, &s6, LARGE), LARGE_PAGES);
        check_faults("large block again, cached", &s5, &s6, 0, thp_always);
    }

    /* Small blocks: carving counts each page once.  No hot span of the
     * blocks above to lend its pages to the small blocks' SuperSlab
     * (arena/hot_span_box.h), which would count them as reused. */
    struct snapshot t0, t1, t2;
    malloc_trim(0);
    take(&t0);
    for (int i = 0; i < SMALL_BLOCKS; i++) {
        small[i] = malloc(opaque_size(64));
        memset(small[i], 3, 64);
    }
    take(&t1);
    for (int i = 0; i < SMALL_BLOCKS; i++) {
        free(small[i]);
    }
    for (int i = 0; i < SMALL_BLOCKS; i++) {
        small[i] = malloc(opaque_size(64));
    }
    take(&t2);
    for (int i = 0; i < SMALL_BLOCKS; i++) {
        free(small[i]);
    }
    long pages = (SMALL_BLOCKS * 64 + 4095) / 4096;
    CHECK(first_delta(&t0, &t1, C3) >= pages && first_delta(&t0, &t1, C3) <= pages + 2,
          "%d blocks of 64 B: %ld C3 pages first touched, want %ld", SMALL_BLOCKS,
          first_delta(&t0, &t1, C3), pages);
    CHECK(first_delta(&t1, &t2, C3) == 0, "64 B blocks again: %ld C3 pages first touched",
          first_delta(&t1, &t2, C3));
    return test_result(cold ? "test_page_telemetry (decommitted)" : "test_page_telemetry (hot)");
}

/* Runs the child with HAKMEM_STATS=1 and checks its exit report too. */
static void run_child(const char *self, int cold)
{
    FILE *err = tmpfile();
    if (err == NULL) {
        hard_error("tmpfile failed");
    }
    pid_t pid = fork();
    if (pid < 0) {
        hard_error("fork failed");
    }
    if (pid == 0) {
        dup2(fileno(err), 2);
        setenv("HAKMEM_STATS", "1", 1);
        setenv("HAKMEM_HUGE_PAGES", "0", 1);
        setenv("HAKMEM_L25_RING", "1", 1);
        setenv("HAKMEM_DECAY_MS", "3600000", 1);
        if (cold) {
            setenv("HAKMEM_HOT_BYTES", "0", 1);
        }
        execl(self, self, cold ? "cold" : "hot", (char *)NULL);
        _exit(EXIT_HARD_ERROR);
    }
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        hard_error("waitpid failed");
    }
    static char text[65536];
    size_t len = (size_t)pread(fileno(err), text, sizeof(text) - 1, 0);
    text[len < sizeof(text) ? len : 0] = 0;
    fclose(err);
    fputs(text, stderr);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s child: status %d",
          cold ? "decommitted" : "hot", status);
    const char *table = strstr(text, "\npages ");
    const char *faults = strstr(text, "\nprocess_minor_faults ");
    CHECK(table != NULL && faults != NULL && table < faults && strstr(table, "\nL25 ") != NULL &&
              strstr(table, "\nSSM ") != NULL && strstr(table, "\ntotal ") != NULL,
          "HAKMEM_STATS=1: no pages table beside process_minor_faults in the exit report");
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        return child(strcmp(argv[1], "cold") == 0, thp_always());
    }
    if (under_valgrind()) {
        printf("under valgrind faults are valgrind's: skipped\n");
        return EXIT_SKIP;
    }
    run_child("/proc/self/exe", 0);
    run_child("/proc/self/exe", 1);
    return test_result("test_page_telemetry");
}
