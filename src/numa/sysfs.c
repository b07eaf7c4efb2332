#include "sysfs.h"

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static unsigned parse_number(const char *text, size_t len, size_t *pos)
{
    unsigned value = 0;
    for (; *pos < len && is_digit(text[*pos]); (*pos)++)
        value = value * 10 + (unsigned)(text[*pos] - '0');
    return value;
}

unsigned hak_numa_list_count(const char *text, size_t len)
{
    unsigned count = 0;
    size_t pos = 0;
    while (pos < len && is_digit(text[pos])) {
        unsigned first = parse_number(text, len, &pos);
        unsigned last = first;
        if (pos < len && text[pos] == '-') {
            pos++;
            if (pos == len || !is_digit(text[pos]))
                break;
            last = parse_number(text, len, &pos);
        }
        if (last >= first)
            count += last - first + 1;
        if (pos < len && text[pos] == ',')
            pos++;
    }
    return count;
}

unsigned hak_numa_online_nodes(void)
{
    int fd = open("/sys/devices/system/node/online", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 1;
    /* Long enough for any list that has more than one node in it; a
     * longer one is cut, which still counts more than one. */
    char text[256];
    ssize_t len = read(fd, text, sizeof(text));
    close(fd);
    if (len <= 0)
        return 1;
    unsigned count = hak_numa_list_count(text, (size_t)len);
    return count ? count : 1;
}
