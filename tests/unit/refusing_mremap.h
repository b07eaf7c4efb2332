/* An mremap for the unit tests, which the allocator's os.c calls instead of
 * the C library's (the tests link its objects): it moves as the kernel does,
 * but refuses a move (MREMAP_FIXED) whose source mremap_refused says so,
 * as Linux before 6.17 refuses one over several of its mappings (after it
 * unmapped the destination), or as Linux before 5.7 refuses
 * MREMAP_DONTUNMAP (mremap_refusal).  It counts the refusals and keeps the sources
 * of the last moves it let through.  play_linux_6_1 makes the program such
 * a kernel: uname says 6.1, and a move whose source is not within one
 * line of /proc/self/maps is refused. */
#ifndef HAKMEM_UNIT_REFUSING_MREMAP_H
#define HAKMEM_UNIT_REFUSING_MREMAP_H

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

/* NULL: every move as the kernel does it. */
static bool (*mremap_refused)(const void *source, size_t size);
/* How a move is refused: EFAULT as Linux before 6.17 refuses one over
 * several mappings, after it unmapped the destination; EINVAL as Linux
 * before 5.7 refuses MREMAP_DONTUNMAP, before it does anything. */
static int mremap_refusal = EFAULT;

/* Volatile: the compiler takes malloc for a call that writes no memory of
 * the program's, and mremap runs inside it. */
static volatile unsigned mremap_refusals;
#define MREMAP_MOVES_KEPT 16
static void *volatile mremap_moved_from[MREMAP_MOVES_KEPT];
static volatile unsigned mremap_moves;

void *mremap(void *old_address, size_t old_size, size_t new_size, int flags, ...)
{
    void *new_address = NULL;
    if (flags & MREMAP_FIXED) {
        va_list args;
        va_start(args, flags);
        new_address = va_arg(args, void *);
        va_end(args);
        if (mremap_refused && mremap_refused(old_address, old_size)) {
            if (mremap_refusal == EFAULT)
                munmap(new_address, new_size);
            mremap_refusals++;
            errno = mremap_refusal;
            return MAP_FAILED;
        }
    }
    void *result = (void *)syscall(SYS_mremap, old_address, old_size, new_size, flags, new_address);
    if (result != MAP_FAILED && (flags & MREMAP_FIXED))
        mremap_moved_from[mremap_moves++ % MREMAP_MOVES_KEPT] = old_address;
    return result;
}

/* Whether a move from source was let through since the count was first. */
static inline bool mremap_moved_since(unsigned first, const void *source)
{
    for (unsigned i = first; i < mremap_moves && i < first + MREMAP_MOVES_KEPT; i++)
        if (mremap_moved_from[i % MREMAP_MOVES_KEPT] == source)
            return true;
    return false;
}

/* Set by play_linux_6_1, before the allocator first asks (os.c keeps the
 * answer). */
static bool uname_says_6_1;

int uname(struct utsname *name)
{
    if (!uname_says_6_1)
        return (int)syscall(SYS_uname, name);
    memset(name, 0, sizeof(*name));
    strcpy(name->sysname, "Linux");
    strcpy(name->release, "6.1.0-test");
    return 0;
}

/* /proc/self/maps, read with no allocation (mremap runs inside malloc). */
static char maps_text[1 << 18];

static unsigned long parse_hex(const char **text)
{
    unsigned long value = 0;
    for (;; (*text)++) {
        char c = **text;
        unsigned digit = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                         : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                                : 16;
        if (digit == 16)
            return value;
        value = value * 16 + digit;
    }
}

/* Whether [start, start + size) lies within one line of /proc/self/maps. */
static inline bool within_one_mapping(uintptr_t start, size_t size)
{
    int fd = open("/proc/self/maps", O_RDONLY);
    if (fd < 0)
        return true;
    size_t length = 0;
    ssize_t got;
    while (length < sizeof(maps_text) - 1 &&
           (got = read(fd, maps_text + length, sizeof(maps_text) - 1 - length)) > 0)
        length += (size_t)got;
    close(fd);
    maps_text[length] = '\0';
    for (const char *line = maps_text; *line;) {
        unsigned long low = parse_hex(&line);
        line++; /* '-' */
        unsigned long high = parse_hex(&line);
        if (low <= start && start < high)
            return start + size <= high;
        line = strchr(line, '\n');
        if (!line)
            break;
        line++;
    }
    return false;
}

static inline bool over_several_mappings(const void *source, size_t size)
{
    return !within_one_mapping((uintptr_t)source, size);
}

/* A kernel before 6.17, from the first call on: call it before the first
 * malloc. */
static inline void play_linux_6_1(void)
{
    uname_says_6_1 = true;
    mremap_refused = over_several_mappings;
}

#endif
