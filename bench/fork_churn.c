/* fork_churn: a server that forks workers while its threads keep
 * allocating.  threads threads malloc and free 16 B-4 KiB blocks in a working
 * set of their own; meanwhile the main thread forks forks times, each child
 * allocating and freeing a few blocks before it exits, and waits for each.
 * ops = forks; minflt counts the children's faults too: copy-on-write of the
 * allocator's state in the child is the cost this measures. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define WORKING_SET 4096

static atomic_bool stop;

static void *allocate(void *arg)
{
    uint32_t seed = (uint32_t)(uintptr_t)arg * 2654435761u + 1;
    void **slots = bench_xcalloc(WORKING_SET, sizeof(void *));
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int i = 0; i < 1000; i++) {
            uint32_t r = bench_xorshift32(&seed);
            size_t slot = r % WORKING_SET;
            free(slots[slot]);
            size_t size = 16 + (r >> 12) % 4081;
            slots[slot] = bench_xmalloc(size);
            ((unsigned char *)slots[slot])[0] = (unsigned char)r;
        }
    }
    for (size_t i = 0; i < WORKING_SET; i++)
        free(slots[i]);
    free(slots);
    return NULL;
}

/* What a worker does before its real work: a few blocks of its own. */
static void child(void)
{
    void *blocks[64];
    for (int i = 0; i < 64; i++) {
        blocks[i] = malloc(32 + (size_t)i * 61);
        if (blocks[i] == NULL)
            _exit(1);
        ((unsigned char *)blocks[i])[0] = (unsigned char)i;
    }
    for (int i = 0; i < 64; i++)
        free(blocks[i]);
    _exit(0);
}

int main(int argc, char **argv)
{
    struct bench_param params[] = {
        {"forks", 300, 1},
        {"threads", 2, 0},
    };
    size_t count = sizeof(params) / sizeof(params[0]);

    bench_parse_args(argc, argv, params, count);
    long forks = params[0].value;
    long threads = params[1].value;
    pthread_t *workers = bench_xcalloc((size_t)(threads ? threads : 1), sizeof(pthread_t));
    for (long t = 0; t < threads; t++) {
        if (pthread_create(&workers[t], NULL, allocate, (void *)(uintptr_t)(t + 1)) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
            return 1;
        }
    }

    double start = bench_now();
    for (long i = 0; i < forks; i++) {
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0)
            child();
        int status;
        if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "%s: child %ld failed (status 0x%x)\n", argv[0], i, status);
            return 1;
        }
    }
    double seconds = bench_now() - start;

    atomic_store(&stop, true);
    for (long t = 0; t < threads; t++)
        pthread_join(workers[t], NULL);
    free(workers);
    bench_report("fork_churn", (double)forks, seconds, params, count);
    return 0;
}
