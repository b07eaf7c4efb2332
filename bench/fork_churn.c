/* fork_churn: a server that forks workers while its threads keep serving.
 * threads threads malloc and free 16 B-4 KiB blocks in a working set of
 * their own, work operations each per fork, as a server's threads handle
 * the requests that come in meanwhile; at the same time the main thread
 * forks, the child allocating and freeing a few blocks before it exits,
 * and waits for the child and for the threads' work.  ops = forks; minflt
 * counts the children's faults too: copy-on-write of the pages the threads
 * write after each fork, and of the allocator's state in the child, is the
 * cost this measures.
 *
 * The work per fork is fixed.  Threads that ran freely wrote more pages
 * between two forks the faster their allocator was, and took a fault for
 * each: hakmem's did twice glibc's operations, at 0.2 faults each against
 * glibc's 0.4, and so forked half as often. */
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"

#define WORKING_SET 4096

struct worker {
    pthread_t thread;
    uint32_t seed;
    long rounds; /* one per fork */
    long work;   /* operations per round */
} __attribute__((aligned(64)));

/* The threads and the main thread meet before each fork and after it. */
static pthread_barrier_t round_start;
static pthread_barrier_t round_end;

static void *allocate(void *arg)
{
    struct worker *self = arg;
    uint32_t seed = self->seed;
    void **slots = bench_xcalloc(WORKING_SET, sizeof(void *));
    for (long round = 0; round < self->rounds; round++) {
        pthread_barrier_wait(&round_start);
        for (long i = 0; i < self->work; i++) {
            uint32_t r = bench_xorshift32(&seed);
            size_t slot = r % WORKING_SET;
            free(slots[slot]);
            size_t size = 16 + (r >> 12) % 4081;
            slots[slot] = bench_xmalloc(size);
            ((unsigned char *)slots[slot])[0] = (unsigned char)r;
        }
        pthread_barrier_wait(&round_end);
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
        {"work", 2000, 0},
    };
    size_t count = sizeof(params) / sizeof(params[0]);
    bench_parse_args(argc, argv, params, count);
    long forks = params[0].value;
    long threads = params[1].value;
    struct worker *workers = bench_xcalloc((size_t)(threads ? threads : 1), sizeof(*workers));
    pthread_barrier_init(&round_start, NULL, (unsigned)threads + 1);
    pthread_barrier_init(&round_end, NULL, (unsigned)threads + 1);
    for (long t = 0; t < threads; t++) {
        workers[t] = (struct worker){
            .seed = (uint32_t)(t + 1) * 2654435761u + 1,
            .rounds = forks,
            .work = params[2].value,
        };
        if (pthread_create(&workers[t].thread, NULL, allocate, &workers[t]) != 0) {
            fprintf(stderr, "%s: pthread_create failed\n", argv[0]);
            return 1;
        }
    }

    double start = bench_now();
    for (long i = 0; i < forks; i++) {
        pthread_barrier_wait(&round_start);
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
        pthread_barrier_wait(&round_end);
    }
    double seconds = bench_now() - start;

    for (long t = 0; t < threads; t++)
        pthread_join(workers[t].thread, NULL);
    pthread_barrier_destroy(&round_start);
    pthread_barrier_destroy(&round_end);
    free(workers);
    bench_report("fork_churn", (double)forks, seconds, params, count);
    return 0;
}
