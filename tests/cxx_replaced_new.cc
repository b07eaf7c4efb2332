// A program may replace only operator new(size_t) and operator delete(void*):
// every other form must reach them, as the standard and libstdc++ have it.
// This one's replacements put a 16-byte header before each block and count;
// the derived forms it leaves to hakmem (src/cxx_operators.c) must forward to
// them, so that the counts match and no block reaches hakmem's free with the
// header still in front of it.  A nothrow new that fails returns nullptr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>

#include "cxx_check.h"

// Replacing delete(void *) alone is the point: the sized forms are hakmem's.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wsized-deallocation"
#endif

static unsigned long news, deletes;
static const std::uint32_t magic = 0x6e657721;

__attribute__((noinline)) void *operator new(std::size_t size)
{
    char *block = size <= SIZE_MAX - 16 ? static_cast<char *>(std::malloc(size + 16)) : nullptr;
    if (!block)
        throw std::bad_alloc();
    std::memcpy(block, &magic, sizeof magic);
    news++;
    return block + 16;
}

__attribute__((noinline)) void operator delete(void *ptr) noexcept
{
    if (!ptr)
        return;
    char *block = static_cast<char *>(ptr) - 16;
    std::uint32_t seen;
    std::memcpy(&seen, block, sizeof seen);
    if (seen != magic) {
        std::fprintf(stderr, "FAIL: operator delete(%p): not a block of operator new\n", ptr);
        std::abort();
    }
    std::memset(block, 0, sizeof seen);
    deletes++;
    std::free(block);
}

// Keeps the compiler from folding or dropping a size.
static std::size_t opaque(std::size_t size)
{
    volatile std::size_t hidden = size;
    return hidden;
}

struct Plain {
    long values[5];
};

struct WithDestructor {
    long value;
    ~WithDestructor()
    {
        value = 0;
    }
};

struct alignas(64) Aligned {
    char bytes[64];
};

static void *volatile sink;

static void check_counts(const char *what, unsigned long expected)
{
    CHECK(news == expected && deletes == expected,
          "%s: %lu news and %lu deletes reached the replacements, expected %lu of each", what, news,
          deletes, expected);
}

int main()
{
    // The forms this program leaves alone must be hakmem's, or the test
    // tests nothing.
    static const char *const names[] = {"_Znam", "_ZdlPvm", "_ZdaPv", "_ZnwmRKSt9nothrow_t"};
    for (const char *name : names) {
        Dl_info info;
        void *symbol = dlsym(RTLD_DEFAULT, name);
        CHECK(symbol && dladdr(symbol, &info) && info.dli_fname &&
                  std::strstr(info.dli_fname, "libhakmem"),
              "%s does not resolve to libhakmem", name);
    }
    unsigned long expected = 0;

    Plain *plain = new Plain();
    sink = plain;
    delete plain; // sized: _ZdlPvm
    check_counts("new/delete", expected += 1);

    Plain *plains = new Plain[opaque(7)];
    sink = plains;
    delete[] plains; // _ZdaPv
    check_counts("new[]/delete[]", expected += 1);

    WithDestructor *objects = new WithDestructor[opaque(9)];
    sink = objects;
    delete[] objects; // sized: _ZdaPvm
    check_counts("new[]/sized delete[]", expected += 1);

    Plain *quiet = new (std::nothrow) Plain();
    sink = quiet;
    CHECK(quiet, "nothrow new returned nullptr");
    delete quiet;
    check_counts("nothrow new", expected += 1);

    char *quiets = new (std::nothrow) char[opaque(33)];
    sink = quiets;
    CHECK(quiets, "nothrow new[] returned nullptr");
    operator delete[](quiets, std::nothrow);
    check_counts("nothrow new[]", expected += 1);

    sink = new (std::nothrow) char[opaque(SIZE_MAX / 2)];
    CHECK(!sink, "a nothrow new[] of SIZE_MAX / 2 bytes returned %p", sink);
    sink = operator new(opaque(SIZE_MAX / 2), std::nothrow);
    CHECK(!sink, "a nothrow new of SIZE_MAX / 2 bytes returned %p", sink);
    check_counts("failing nothrow new", expected);

    // Aligned new is not replaced: hakmem's aligned forms pair up.
    Aligned *aligned = new Aligned();
    sink = aligned;
    CHECK(reinterpret_cast<std::uintptr_t>(aligned) % 64 == 0, "aligned new gave %p", sink);
    delete aligned;
    check_counts("aligned new", expected);

    if (failures) {
        std::fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    std::puts("ok: the derived forms reach the replaced operator new and delete");
    return 0;
}
