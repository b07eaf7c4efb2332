/* Checked mode (HAKMEM_HARDEN=2) resizes a block in place while the new
 * size and the canary's record still fit it, as level 1 does (issue 15:
 * every growing realloc moved the block, and 300,000 one-byte growths took
 * 12 s against 0.013 s).  So 300,000 one-byte growths move the block about
 * as few times at level 2 as at level 1, and keep its contents; and the
 * canary follows the new size, so that a write one byte past it, after a
 * growth or a shrink in place, is still caught at the free.  A block grown
 * 64 bytes at a time to 4 MiB, past the size where realloc makes it a large
 * one, moves about as few times at level 2 as at level 1 too (it moved at
 * every page there, each time to a mapping faulted in anew: to 1 MiB 16
 * bytes at a time took 2.5 s against 0.03 s), and a block moved with room
 * to grow still has its canary right after its size.  And the check
 * of a block's canary when its neighbour above is handed out or freed is
 * not fooled by another thread resizing or freeing that block meanwhile
 * (it aborted "heap overflow" about once in 20 runs of test_threads).
 *
 * The level is read at start-up: each part runs in a child (this program
 * again, "test_realloc_checked PART", with HAKMEM_HARDEN set).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define GROWTHS 300000
#define LARGE_STEP 64
#define LARGE_GROWN (4 << 20)

/* ---- the children ---- */

/* A block of step bytes grown step bytes at a time to max. */
static void grow(size_t step, size_t max)
{
    unsigned char *block = malloc(opaque_size(step));
    long moves = 0;
    if (block == NULL) {
        _exit(EXIT_HARD_ERROR);
    }
    memset(block, 1, step);
    for (size_t size = 2 * step; size <= max; size += step) {
        unsigned char *grown = realloc(block, opaque_size(size));
        if (grown == NULL) {
            _exit(EXIT_HARD_ERROR);
        }
        moves += grown != block;
        block = grown;
        memset(block + size - step, (int)(size / step), step);
    }
    for (size_t i = 0; i + step <= max; i += step) {
        if (block[i] != (unsigned char)(i / step + 1)) {
            fprintf(stderr, "byte %zu lost its value\n", i);
            _exit(EXIT_FAILURE);
        }
    }
    free(block);
    printf("moves=%ld\n", moves);
    fflush(stdout);
    _exit(EXIT_SUCCESS);
}

/* A block of old bytes reallocated to size, in place or moved as moves
 * says, then one byte written past size. */
static void overflow_after_realloc(size_t old, size_t size, bool moves)
{
    char *block = malloc(opaque_size(old));
    char *resized = block ? realloc(block, opaque_size(size)) : NULL;
    if (resized == NULL) {
        fprintf(stderr, "malloc(%zu) or realloc to %zu failed\n", old, size);
        _exit(EXIT_HARD_ERROR);
    }
    if ((resized != block) != moves) {
        fprintf(stderr, "realloc(%p, %zu) %s the block: %p\n", (void *)block, size,
                moves ? "did not move" : "moved", (void *)resized);
        _exit(EXIT_HARD_ERROR);
    }
    memset(resized, 1, size);
    ((char *volatile)resized)[size] = 0;
    free(resized);
    fprintf(stderr, "the overflow went unnoticed\n");
    _exit(EXIT_FAILURE);
}

/* Another thread resizes a block, over and over, while its slab's owner
 * hands out and takes back the block just above it, which checks the
 * canary of the block below (its neighbour's overflow would land there).
 * The resizes are the program's own: no abort may name them.  (The first
 * resize moves the block to the resizing thread's own slab; before it did,
 * they all stayed in place and the owner read their canaries half
 * rewritten.) */
#define NEIGHBOUR_ROUNDS 400000

static atomic_int resizer_stop;

static void *resize_forever(void *arg)
{
    char *block = arg;
    for (unsigned round = 0; !atomic_load(&resizer_stop); round++) {
        size_t size = opaque_size(round % 2 ? 1000 : 520);
        char *resized = realloc(block, size);
        if (resized == NULL) {
            _exit(EXIT_HARD_ERROR);
        }
        memset(resized, 7, size);
        block = resized;
    }
    free(block);
    return NULL;
}

static void resize_beside_owner(void)
{
    /* Two neighbours in a 1 KiB class: the second is the one above. */
    char *below = malloc(opaque_size(1000));
    char *above = malloc(opaque_size(1000));
    if (below == NULL || above == NULL || above - below != 1024) {
        fprintf(stderr, "blocks %p and %p are not neighbours\n", (void *)below, (void *)above);
        _exit(EXIT_HARD_ERROR);
    }
    pthread_t resizer;
    if (pthread_create(&resizer, NULL, resize_forever, below) != 0) {
        _exit(EXIT_HARD_ERROR);
    }
    for (unsigned round = 0; round < NEIGHBOUR_ROUNDS; round++) {
        free(above);
        above = malloc(opaque_size(1000));
        if (above == NULL) {
            _exit(EXIT_HARD_ERROR);
        }
    }
    atomic_store(&resizer_stop, 1);
    pthread_join(resizer, NULL);
    free(above);
    printf("ok\n");
    fflush(stdout);
    _exit(EXIT_SUCCESS);
}

/* Another thread frees the block below, whose canary begins in the words
 * a free writes (its link and free tag), while the owner keeps checking it.
 * The waits yield, so that one CPU runs it too. */
#define FREE_ROUNDS 200000

static char *_Atomic handed_over;

static void *free_handed_over(void *arg)
{
    (void)arg;
    for (unsigned round = 0; round < FREE_ROUNDS; round++) {
        char *block;
        while ((block = atomic_load(&handed_over)) == NULL) {
            sched_yield();
        }
        free(block);
        atomic_store(&handed_over, NULL);
    }
    return NULL;
}

static void free_beside_owner(void)
{
    pthread_t freer;
    if (pthread_create(&freer, NULL, free_handed_over, NULL) != 0) {
        _exit(EXIT_HARD_ERROR);
    }
    unsigned neighbours = 0;
    for (unsigned round = 0; round < FREE_ROUNDS; round++) {
        char *below = malloc(opaque_size(3));
        char *above = malloc(opaque_size(3));
        if (below == NULL || above == NULL) {
            _exit(EXIT_HARD_ERROR);
        }
        neighbours += above - below == 16;
        memset(below, 1, 3);
        atomic_store(&handed_over, below);
        while (atomic_load(&handed_over) != NULL) {
            free(above);
            above = malloc(opaque_size(3));
            sched_yield();
        }
        free(above);
    }
    pthread_join(freer, NULL);
    /* Most rounds: the slab's blocks come back in the order they went. */
    if (neighbours < FREE_ROUNDS / 2) {
        fprintf(stderr, "only %u of %u rounds had neighbours\n", neighbours, FREE_ROUNDS);
        _exit(EXIT_HARD_ERROR);
    }
    printf("ok\n");
    fflush(stdout);
    _exit(EXIT_SUCCESS);
}

/* ---- the parent ---- */

/* Runs this program's PART at LEVEL; its stdout and stderr go to out. */
static int run_part(const char *self, const char *part, const char *level, char *out,
                    size_t out_size)
{
    int out_pipe[2];
    if (pipe(out_pipe) != 0) {
        hard_error("pipe: %s", strerror(errno));
    }
    pid_t pid = fork_fault_child(120);
    if (pid == 0) {
        dup2(out_pipe[1], STDOUT_FILENO);
        dup2(out_pipe[1], STDERR_FILENO);
        close(out_pipe[0]);
        setenv("HAKMEM_HARDEN", level, 1);
        execl(self, self, part, (char *)NULL);
        _exit(EXIT_HARD_ERROR);
    }
    close(out_pipe[1]);
    read_all(out_pipe[0], out, out_size);
    close(out_pipe[0]);
    int status;
    if (waitpid(pid, &status, 0) != pid) {
        hard_error("waitpid: %s", strerror(errno));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_HARD_ERROR) {
        hard_error("%s at HAKMEM_HARDEN=%s could not run:\n%s", part, level, out);
    }
    return status;
}

static long moves_at(const char *self, const char *part, const char *level)
{
    char out[4096];
    int status = run_part(self, part, level, out, sizeof(out));
    const char *moves = strstr(out, "moves=");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && moves != NULL,
          "%s at HAKMEM_HARDEN=%s: status 0x%x, output:\n%s", part, level, status, out);
    return moves ? strtol(moves + 6, NULL, 10) : -1;
}

static void check_overflow(const char *self, const char *part)
{
    char out[4096];
    int status = run_part(self, part, "2", out, sizeof(out));
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT &&
              strstr(out, "hakmem: heap overflow past block") != NULL,
          "%s at HAKMEM_HARDEN=2: status 0x%x, output:\n%s", part, status, out);
}

/* A part where another thread writes into the neighbour below while the
 * slab's owner checks its canary: it must run clean. */
static void check_race(const char *self, const char *part)
{
    char out[4096];
    int status = run_part(self, part, "2", out, sizeof(out));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "%s at HAKMEM_HARDEN=2: status 0x%x, output:\n%s", part, status, out);
}

int main(int argc, char **argv)
{
    if (argc == 2) {
        if (!strcmp(argv[1], "grow")) {
            grow(1, GROWTHS);
        } else if (!strcmp(argv[1], "grow_large")) {
            grow(LARGE_STEP, LARGE_GROWN);
        } else if (!strcmp(argv[1], "overflow_after_small_move")) {
            overflow_after_realloc(2000, 2100, true); /* with room, at least at level 1 */
        } else if (!strcmp(argv[1], "overflow_after_large_move")) {
            overflow_after_realloc(250000, 280000, true); /* the same, made large */
        } else if (!strcmp(argv[1], "overflow_after_growth")) {
            /* 110 bytes: a 128-byte block with the canary's record. */
            overflow_after_realloc(110, 118, false);
        } else if (!strcmp(argv[1], "overflow_after_shrink")) {
            overflow_after_realloc(110, 70, false);
        } else if (!strcmp(argv[1], "resize_beside_owner")) {
            resize_beside_owner();
        } else if (!strcmp(argv[1], "free_beside_owner")) {
            free_beside_owner();
        }
        _exit(EXIT_HARD_ERROR);
    }
    if (under_valgrind()) {
        printf("test_realloc_checked: skipped under valgrind (memcheck reports the overflow)\n");
        return EXIT_SKIP;
    }
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len <= 0) {
        hard_error("readlink /proc/self/exe: %s", strerror(errno));
    }
    self[len] = 0;

    long plain = moves_at(self, "grow", "1");
    long checked = moves_at(self, "grow", "2");
    printf("%d one-byte growths: %ld moves at level 1, %ld at level 2\n", GROWTHS, plain, checked);
    /* The canary's record can make a block leave its class a few bytes
     * early, never make it move more often within one. */
    CHECK(checked >= 0 && checked <= plain + 16,
          "%d one-byte growths moved the block %ld times at level 2, %ld at level 1", GROWTHS,
          checked, plain);
    plain = moves_at(self, "grow_large", "1");
    checked = moves_at(self, "grow_large", "2");
    printf("%d-byte growths to %d bytes: %ld moves at level 1, %ld at level 2\n", LARGE_STEP,
           LARGE_GROWN, plain, checked);
    CHECK(checked >= 0 && checked <= plain + 16,
          "%d-byte growths to %d bytes moved the block %ld times at level 2, %ld at level 1",
          LARGE_STEP, LARGE_GROWN, checked, plain);
    check_overflow(self, "overflow_after_growth");
    check_overflow(self, "overflow_after_shrink");
    check_overflow(self, "overflow_after_small_move");
    check_overflow(self, "overflow_after_large_move");

    check_race(self, "resize_beside_owner");
    check_race(self, "free_beside_owner");
    return test_result("test_realloc_checked");
}
