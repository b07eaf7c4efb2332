/* Runs a libFuzzer target without libFuzzer: replays the files and the
 * folders of files named on the command line (a corpus, crash inputs), then
 * as many pseudo-random inputs as --random=N asks for, from --seed=S.  This
 * keeps the fuzz target built and exercised where clang is not installed,
 * and reproduces a crash input under gcc's sanitizers or a debugger.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../harness.h"

#define MAX_INPUT_BYTES (1 << 20)
#define MAX_RANDOM_INPUT_BYTES 512

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t input_buffer[MAX_INPUT_BYTES];

static void replay_file(const char *path)
{
    FILE *file = fopen(path, "rb");

    if (file == NULL) {
        hard_error("cannot open %s: %s", path, strerror(errno));
    }
    size_t size = fread(input_buffer, 1, sizeof(input_buffer), file);
    if (ferror(file)) {
        hard_error("cannot read %s", path);
    }
    fclose(file);
    LLVMFuzzerTestOneInput(input_buffer, size);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files in folder in name order, so that a run can be
 * repeated exactly; returns how many. */
static size_t replay_folder(const char *folder)
{
    DIR *dir = opendir(folder);
    char **names = NULL;
    size_t count = 0, capacity = 0;
    struct dirent *entry;

    if (dir == NULL) {
        hard_error("cannot open %s: %s", folder, strerror(errno));
    }
    while ((entry = readdir(dir)) != NULL) {
        if (entry->d_name[0] == '.') {
            continue;
        }
        if (count == capacity) {
            capacity = capacity ? 2 * capacity : 64;
            names = realloc(names, capacity * sizeof(*names));
            if (names == NULL) {
                hard_error("out of memory listing %s", folder);
            }
        }
        if (asprintf(&names[count], "%s/%s", folder, entry->d_name) < 0) {
            hard_error("out of memory listing %s", folder);
        }
        count++;
    }
    closedir(dir);
    qsort(names, count, sizeof(*names), compare_names);
    for (size_t i = 0; i < count; i++) {
        replay_file(names[i]);
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    unsigned long random_inputs = 0;
    uint64_t rng = 1;
    size_t replayed = 0;

    for (int i = 1; i < argc; i++) {
        struct stat info;

        if (strncmp(argv[i], "--random=", 9) == 0) {
            random_inputs = strtoul(argv[i] + 9, NULL, 10);
        } else if (strncmp(argv[i], "--seed=", 7) == 0) {
            rng = strtoull(argv[i] + 7, NULL, 10);
        } else if (stat(argv[i], &info) != 0) {
            hard_error("%s: %s", argv[i], strerror(errno));
        } else if (S_ISDIR(info.st_mode)) {
            replayed += replay_folder(argv[i]);
        } else {
            replay_file(argv[i]);
            replayed++;
        }
    }
    for (unsigned long n = 0; n < random_inputs; n++) {
        size_t size = rng_range(&rng, 1, MAX_RANDOM_INPUT_BYTES);

        for (size_t i = 0; i < size; i++) {
            input_buffer[i] = (uint8_t)rng_next(&rng);
        }
        LLVMFuzzerTestOneInput(input_buffer, size);
    }
    printf("replayed %zu input file(s) and %lu random input(s) without a failure\n", replayed,
           random_inputs);
    return 0;
}
