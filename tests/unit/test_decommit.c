/* hak_os_decommit_ranges: every range given reads as zeros and leaves
 * memory, in one call or one per range; the pages between keep their
 * contents. */
#include <string.h>

#include "os.h"
#include "unit.h"

enum { PAGE = 4096, RANGES = 5, STRIDE = 3 * PAGE };

int main(void)
{
    unit_watchdog();
    char *mem = unit_map(RANGES * STRIDE);
    memset(mem, 7, RANGES * STRIDE);
    struct iovec ranges[RANGES];
    for (int i = 0; i < RANGES; i++)
        ranges[i] = (struct iovec){mem + i * STRIDE, 2 * PAGE};
    for (int count = 1; count <= RANGES; count += RANGES - 1) {
        memset(mem, 7, RANGES * STRIDE);
        hak_os_decommit_ranges(ranges, (size_t)count);
        for (int i = 0; i < RANGES; i++) {
            char *range = mem + i * STRIDE;
            bool decommitted = i < count;
            CHECK(unit_page_resident(range) != decommitted &&
                      unit_page_resident(range + PAGE) != decommitted,
                  "%d range(s): range %d is %sresident", count, i, decommitted ? "" : "not ");
            CHECK(range[0] == (decommitted ? 0 : 7) && range[2 * PAGE - 1] == (decommitted ? 0 : 7),
                  "%d range(s): range %d reads %d", count, i, range[0]);
            CHECK(range[2 * PAGE] == 7, "%d range(s): the page after range %d reads %d", count, i,
                  range[2 * PAGE]);
        }
    }
    return test_result("test_decommit");
}
