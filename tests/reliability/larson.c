/* A server simulation in the manner of the larson benchmark: each of a few
 * worker slots holds a table of live objects of random sizes.  The worker
 * thread of a slot replaces random objects (verifying the pattern of each
 * before freeing it) and, after a fixed number of replacements, starts its
 * successor on the same table and exits, so that most objects are freed by a
 * thread other than the one that allocated them, long after that thread is
 * gone.  Some objects also move between slots through a shared exchange, as
 * a request handed to another connection would.  The resident set must stay
 * bounded while thread generations come and go.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "stress.h"

#define SLOTS 4
#define OBJECTS_PER_SLOT 2000
#define REPLACEMENTS_PER_GENERATION 5000
#define EXCHANGE_SIZE 256
#define DEFAULT_SECONDS 6.0

struct object {
    unsigned char *ptr;
    size_t size;
    uint64_t key;
};

struct slot {
    int id;
    uint64_t rng;
    struct object objects[OBJECTS_PER_SLOT];
    uint64_t generations;
    uint64_t replacements;
    uint64_t exchanged;
};

static struct slot slots[SLOTS];
static struct object exchange[EXCHANGE_SIZE];
static pthread_mutex_t exchange_lock = PTHREAD_MUTEX_INITIALIZER;

static double deadline;
static atomic_int slots_finished;
static atomic_ullong objects_verified;
static atomic_size_t live_bytes;

/* Mostly small, as a server's requests are, with a tail up to 2 MiB. */
static const struct size_tier object_sizes[] = {
    {900, 8, 1024},
    {85, 1025, 32 * KiB},
    {14, 32 * KiB + 1, 512 * KiB},
    {1, 512 * KiB + 1, 2 * MiB},
};

static struct object make_object(uint64_t *rng)
{
    struct object object = {NULL, TIERED_SIZE(rng, object_sizes), 0};

    object.ptr = malloc(object.size);
    if (object.ptr == NULL) {
        hard_error("malloc(%zu) failed", object.size);
    }
    atomic_fetch_add_explicit(&live_bytes, object.size, memory_order_relaxed);
    object.key = pattern_key(object.ptr, object.size, rng_next(rng));
    fill_pattern(object.ptr, object.size, object.key);
    return object;
}

static void verify_object(const struct object *object, const char *where)
{
    size_t damaged = pattern_mismatch(object->ptr, object->size, object->key);

    CHECK(damaged == PATTERN_INTACT, "%s: object %p of %zu bytes changed at byte %zu", where,
          (void *)object->ptr, object->size, damaged);
    atomic_fetch_add_explicit(&objects_verified, 1, memory_order_relaxed);
}

static void destroy_object(struct object *object, const char *where)
{
    verify_object(object, where);
    free(object->ptr);
    atomic_fetch_sub_explicit(&live_bytes, object->size, memory_order_relaxed);
    object->ptr = NULL;
}

/* Swaps an object of the slot with one in the exchange; the slot's object
 * will be freed by whichever slot takes it next. */
static void trade(struct slot *slot, struct object *object)
{
    size_t index = (size_t)(rng_next(&slot->rng) % EXCHANGE_SIZE);

    verify_object(object, "before trading");
    pthread_mutex_lock(&exchange_lock);
    struct object taken = exchange[index];
    exchange[index] = *object;
    pthread_mutex_unlock(&exchange_lock);
    verify_object(&taken, "after trading");
    *object = taken;
    slot->exchanged++;
}

static void *run_generation(void *arg);

static void start_generation(struct slot *slot)
{
    pthread_t thread;
    pthread_attr_t attributes;

    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    int error = pthread_create(&thread, &attributes, run_generation, slot);
    pthread_attr_destroy(&attributes);
    if (error != 0) {
        hard_error("pthread_create: %s", strerror(error));
    }
}

static void *run_generation(void *arg)
{
    struct slot *slot = arg;

    slot->generations++;
    for (int done = 0; done < REPLACEMENTS_PER_GENERATION; done++) {
        struct object *object = &slot->objects[rng_next(&slot->rng) % OBJECTS_PER_SLOT];

        if (rng_next(&slot->rng) % 64 == 0) {
            trade(slot, object);
            continue;
        }
        destroy_object(object, "before replacing");
        *object = make_object(&slot->rng);
        slot->replacements++;
    }
    /* The successor inherits the table; this thread's heap goes away with
     * objects of it still live.  Every slot sees at least one handover, however
     * slow the run (valgrind). */
    if (slot->generations < 2 || seconds_now() < deadline) {
        start_generation(slot);
    } else {
        atomic_fetch_add(&slots_finished, 1);
    }
    return NULL;
}

int main(void)
{
    double seconds = stress_seconds(DEFAULT_SECONDS);
    double start = seconds_now();
    struct rss_watch rss = {0};
    uint64_t rng = 0x1a450;

    deadline = start + seconds;
    for (size_t i = 0; i < EXCHANGE_SIZE; i++) {
        exchange[i] = make_object(&rng);
    }
    for (int i = 0; i < SLOTS; i++) {
        slots[i].id = i;
        slots[i].rng = 0x5107000u + (uint64_t)i;
        for (int j = 0; j < OBJECTS_PER_SLOT; j++) {
            slots[i].objects[j] = make_object(&slots[i].rng);
        }
    }
    for (int i = 0; i < SLOTS; i++) {
        start_generation(&slots[i]);
    }
    /* The last generation of each slot starts before the deadline, so the
     * wait is bounded by one generation's work. */
    while (atomic_load(&slots_finished) < SLOTS) {
        rss_watch_sample(&rss, (seconds_now() - start) / seconds, atomic_load(&live_bytes));
        usleep(20000);
    }

    uint64_t generations = 0, replacements = 0, exchanged = 0;
    for (int i = 0; i < SLOTS; i++) {
        for (int j = 0; j < OBJECTS_PER_SLOT; j++) {
            destroy_object(&slots[i].objects[j], "at the end");
        }
        generations += slots[i].generations;
        replacements += slots[i].replacements;
        exchanged += slots[i].exchanged;
    }
    for (size_t i = 0; i < EXCHANGE_SIZE; i++) {
        destroy_object(&exchange[i], "in the exchange at the end");
    }
    double elapsed = seconds_now() - start;
    printf("larson: %.1f s, %d slots, %llu thread generations, %llu objects replaced, "
           "%llu traded, %llu verified\n",
           elapsed, SLOTS, (unsigned long long)generations, (unsigned long long)replacements,
           (unsigned long long)exchanged, (unsigned long long)atomic_load(&objects_verified));
    rss_watch_check(&rss, "larson");
    return test_result("larson");
}
