/* Does the process have libhwloc mapped after doing what makes topology
 * discovery worth it (a second thread, 16 MiB)?  Prints "hwloc
 * mapped" or "hwloc not mapped".  Links only the C library, so that the
 * malloc it exercises is whichever LD_PRELOAD names. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 16
#define BLOCK_SIZE (512 * 1024)

static void *allocate(void *unused)
{
    (void)unused;
    static _Thread_local void *blocks[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        blocks[i] = malloc(BLOCK_SIZE);
        if (!blocks[i])
            return NULL;
        memset(blocks[i], 1, BLOCK_SIZE);
    }
    for (int i = 0; i < BLOCKS; i++)
        free(blocks[i]);
    return blocks;
}

int main(void)
{
    pthread_t threads[2];
    for (int i = 0; i < 2; i++)
        if (pthread_create(&threads[i], NULL, allocate, NULL)) {
            fprintf(stderr, "pthread_create failed\n");
            return 99;
        }
    for (int i = 0; i < 2; i++) {
        void *result;
        pthread_join(threads[i], &result);
        if (!result) {
            fprintf(stderr, "malloc failed\n");
            return 99;
        }
    }
    FILE *maps = fopen("/proc/self/maps", "r");
    if (!maps) {
        fprintf(stderr, "cannot read /proc/self/maps\n");
        return 99;
    }
    char line[4096];
    int mapped = 0;
    while (fgets(line, sizeof(line), maps))
        if (strstr(line, "libhwloc"))
            mapped = 1;
    fclose(maps);
    printf("hwloc %s\n", mapped ? "mapped" : "not mapped");
    return 0;
}
