/* hak_os_free_memory_reported over fake /sys/bus/virtio trees: true only
 * where a device is a balloon (virtio id 0x0005) whose features string has
 * the free page reporting bit (5) set, whatever other devices come first
 * and with a missing number between them; false with no virtio bus, with a
 * balloon that does not report, with a features string too short to hold
 * the bit, and for a device that is not a balloon but has the bit set.
 * HAKMEM_HUGE_PAGES=auto asks for no huge pages where it is true and a
 * small page faults in under 4 us (hak_options_huge_pages_auto), and for
 * them everywhere else.  The fault timing is only checked to end, under
 * the 0.1 s that would mean a machine swapping (0, a clock too coarse to
 * tell, is an answer too); the machine's own answers are printed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "options.h"
#include "os.h"
#include "unit.h"

static char root_dir[] = "/tmp/hakmem-virtio-XXXXXX";
static unsigned trees;

struct device {
    unsigned number;
    const char *id;       /* the device file, as the kernel writes it */
    const char *features; /* one '0' or '1' per feature bit, bit 0 first */
};

static void make_dir(const char *path)
{
    if (mkdir(path, 0755) && errno != EEXIST)
        hard_error("mkdir %s failed", path);
}

static void write_text(const char *path, const char *text)
{
    FILE *file = fopen(path, "w");
    if (!file || fputs(text, file) == EOF || fclose(file))
        hard_error("cannot write %s", path);
}

/* A fresh tree under root_dir with these devices (none: no virtio bus);
 * its root, in a static buffer. */
static const char *make_tree(const struct device *devices, size_t count)
{
    static char root[256], path[512];
    snprintf(root, sizeof(root), "%s/tree%u", root_dir, trees++);
    make_dir(root);
    if (count == 0)
        return root;
    snprintf(path, sizeof(path), "%s/sys", root);
    make_dir(path);
    snprintf(path, sizeof(path), "%s/sys/bus", root);
    make_dir(path);
    snprintf(path, sizeof(path), "%s/sys/bus/virtio", root);
    make_dir(path);
    snprintf(path, sizeof(path), "%s/sys/bus/virtio/devices", root);
    make_dir(path);
    for (size_t i = 0; i < count; i++) {
        char text[160];
        snprintf(path, sizeof(path), "%s/sys/bus/virtio/devices/virtio%u", root, devices[i].number);
        make_dir(path);
        snprintf(path, sizeof(path), "%s/sys/bus/virtio/devices/virtio%u/device", root,
                 devices[i].number);
        snprintf(text, sizeof(text), "%s\n", devices[i].id);
        write_text(path, text);
        snprintf(path, sizeof(path), "%s/sys/bus/virtio/devices/virtio%u/features", root,
                 devices[i].number);
        snprintf(text, sizeof(text), "%s\n", devices[i].features);
        write_text(path, text);
    }
    return root;
}

/* Bits 1 (statistics), 2 (deflate on OOM), 32 (version 1) and, in the
 * second, 5 (free page reporting). */
#define NOT_REPORTING "0110000000000000000000000000000010000000000000000000000000000000"
#define REPORTING "0110010000000000000000000000000010000000000000000000000000000000"

static void check(const char *what, const struct device *devices, size_t count, bool expected)
{
    bool reported = hak_os_free_memory_reported(make_tree(devices, count));
    CHECK(reported == expected, "%s: free memory %s reported", what,
          reported ? "read as" : "not read as");
}

int main(void)
{
    unit_watchdog();
    if (!mkdtemp(root_dir))
        hard_error("mkdtemp failed");

    check("no virtio bus", NULL, 0, false);

    const struct device quiet[] = {
        {0, "0x0001", "1100010110111011000000000000010010000000"},
        {1, "0x0005", NOT_REPORTING},
    };
    check("a balloon without reporting", quiet, 2, false);

    const struct device reporting[] = {
        {0, "0x0002", "0010001001100100000000000000010010000000"},
        {1, "0x0001", "1100010110111011000000000000010010000000"},
        {3, "0x0005", REPORTING}, /* after a missing number */
    };
    check("a reporting balloon after other devices", reporting, 3, true);

    const struct device short_features[] = {{0, "0x0005", "0110"}};
    check("a balloon's features cut short", short_features, 1, false);

    const struct device not_balloon[] = {{0, "0x0004", REPORTING}};
    check("bit 5 of a device that is no balloon", not_balloon, 1, false);

    CHECK(hak_options_huge_pages_auto(false, 500), "auto: no huge pages on a machine that keeps "
                                                   "what it frees");
    CHECK(!hak_options_huge_pages_auto(true, 1500), "auto: huge pages where the host takes back "
                                                    "freed memory and small pages fault in 1.5 us");
    CHECK(hak_options_huge_pages_auto(true, 10000), "auto: no huge pages where the host takes back "
                                                    "freed memory and small pages fault in 10 us");
    CHECK(!hak_options_huge_pages_auto(true, 3999) && hak_options_huge_pages_auto(true, 4000),
          "auto: the line between small-page faults that are slow and those that are not is "
          "not at 4 us");

    uint64_t fault_ns = hak_os_small_page_fault_ns();
    CHECK(fault_ns < 100000000, "a small page's fault timed at %llu ns",
          (unsigned long long)fault_ns);
    bool reported = hak_os_free_memory_reported("");
    printf("this machine: free memory %s reported to a host, a small page faults in %.1f us: "
           "HAKMEM_HUGE_PAGES=auto means %s\n",
           reported ? "is" : "is not", (double)fault_ns / 1000,
           hak_options_huge_pages_auto(reported, fault_ns) ? "huge pages" : "none");

    char command[128];
    snprintf(command, sizeof(command), "rm -rf %s", root_dir);
    if (system(command))
        hard_error("cannot remove %s", root_dir);
    return test_result("test_free_memory_reported");
}
