/* hak_os_free_memory_reported over fake /sys/bus/virtio trees: true only
 * where a device is a balloon (virtio id 0x0005) whose features string has
 * the free page reporting bit (5) set, whatever other devices come first
 * and with a missing number between them; false with no virtio bus, with a
 * balloon that does not report, with a features string too short to hold
 * the bit, and for a device that is not a balloon but has the bit set.
 * HAKMEM_HUGE_PAGES=auto asks for no huge pages where it is true
 * (hak_options_huge_pages); the machine's own answer is printed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

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

    printf("this machine: free memory %s reported to a host\n",
           hak_os_free_memory_reported("") ? "is" : "is not");

    char command[128];
    snprintf(command, sizeof(command), "rm -rf %s", root_dir);
    if (system(command))
        hard_error("cannot remove %s", root_dir);
    return test_result("test_free_memory_reported");
}
