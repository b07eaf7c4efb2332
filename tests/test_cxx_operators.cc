// C++'s operators new and delete are hakmem's (src/cxx_operators.c): the
// program's calls resolve to libhakmem, a failing new throws std::bad_alloc
// or calls the installed new-handler, which can free a reserve so that the
// retry succeeds; nothrow new returns nullptr, aligned new aligns, and every
// delete form frees (the next new of the size gets the block back).
// Its other modes are for test_cxx_preload.sh: --wrong-size makes a sized
// delete with the wrong size, --wrong-alignment an aligned one with an
// alignment the block lacks (both refused at HAKMEM_HARDEN=2); --exhaust news
// 64 MiB blocks until std::bad_alloc comes (run under ulimit -v);
// --double-delete and --interior-delete misuse delete as the misuse tests
// misuse free, and hakmem must stop them.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <new>
#include <sys/resource.h>
#include <utility>

#include "cxx_check.h"
#include "hakmem.h"

// Keeps the compiler from folding or dropping a size.
static std::size_t opaque(std::size_t size)
{
    volatile std::size_t hidden = size;
    return hidden;
}

// The same for an address: clang takes an aligned new-expression's
// alignment as given, and would fold a test of it (and drop the new).
static std::uintptr_t address_of(const void *block)
{
    const void *volatile hidden = block;
    return reinterpret_cast<std::uintptr_t>(hidden);
}

static const std::size_t huge_size = SIZE_MAX / 2;
static void *volatile sink;

static void test_resolution()
{
    static const char *const names[] = {
        "_Znwm", "_Znam", "_ZdlPv", "_ZdlPvm", "_ZnwmSt11align_val_t", "_ZdaPvmSt11align_val_t"};
    for (const char *name : names) {
        Dl_info info;
        void *symbol = dlsym(RTLD_DEFAULT, name);
        CHECK(symbol && dladdr(symbol, &info) && info.dli_fname &&
                  std::strstr(info.dli_fname, "libhakmem"),
              "%s resolves to %s, not libhakmem", name,
              symbol && dladdr(symbol, &info) ? info.dli_fname : "nothing");
    }
    char *block = new char[opaque(100)];
    CHECK(hak_node_of(block) >= 0, "new's block %p is not hakmem's", (void *)block);
    delete[] block;
}

static void test_bad_alloc()
{
    bool thrown = false;
    try {
        // Stored, or the compiler may drop a new-expression paired with
        // its delete.
        sink = new char[opaque(huge_size)];
        delete[] static_cast<char *>(sink);
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown, "new char[SIZE_MAX / 2] did not throw std::bad_alloc");
    thrown = false;
    try {
        ::operator delete(::operator new(opaque(huge_size), std::align_val_t(64)),
                          std::align_val_t(64));
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown, "aligned operator new(SIZE_MAX / 2) did not throw std::bad_alloc");
    // Called, not a new-expression: a compiler may leave out the allocation
    // of a new-expression whose block is never used (clang does).
    CHECK(::operator new[](opaque(huge_size), std::nothrow) == nullptr,
          "nothrow new[] of SIZE_MAX / 2 did not return nullptr");
    CHECK(::operator new(opaque(huge_size), std::align_val_t(4096), std::nothrow) == nullptr,
          "nothrow aligned new of SIZE_MAX / 2 did not return nullptr");
}

static int handler_calls;

// Gives up on its third call: the new that called it then throws.
static void give_up_on_third_call()
{
    if (++handler_calls == 3)
        std::set_new_handler(nullptr);
}

static void test_handler_then_throw()
{
    handler_calls = 0;
    std::set_new_handler(give_up_on_third_call);
    bool thrown = false;
    try {
        ::operator delete(::operator new(opaque(huge_size)));
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown && handler_calls == 3,
          "new with a handler that gives up at its third call: thrown %d after %d calls", thrown,
          handler_calls);
    // The standard's nothrow new consults the handler too.
    handler_calls = 2;
    std::set_new_handler(give_up_on_third_call);
    CHECK(::operator new[](opaque(huge_size), std::nothrow) == nullptr &&handler_calls == 3,
          "nothrow new[] with a handler: %d handler calls", handler_calls);
    std::set_new_handler(nullptr);
}

// An alignment that is not a power of two (undefined behaviour) fails at
// once: no handler call, no endless retry.  The handler gives up on its third
// call, so a loop would end, but with calls counted.
static void test_bad_alignment()
{
    handler_calls = 0;
    std::set_new_handler(give_up_on_third_call);
    bool thrown = false;
    try {
        ::operator delete(::operator new(opaque(64), std::align_val_t(opaque(48))),
                          std::align_val_t(48));
    } catch (const std::bad_alloc &) {
        thrown = true;
    }
    CHECK(thrown && handler_calls == 0, "aligned new to 48: thrown %d after %d handler calls",
          thrown, handler_calls);
    handler_calls = 0;
    std::set_new_handler(give_up_on_third_call);
    void *quiet = ::operator new[](opaque(64), std::align_val_t(opaque(48)), std::nothrow);
    CHECK(quiet == nullptr && handler_calls == 0,
          "nothrow aligned new[] to 48: %p after %d handler calls", quiet, handler_calls);
    std::set_new_handler(nullptr);
}

static char *reserve;

static void free_reserve()
{
    handler_calls++;
    delete[] reserve;
    reserve = nullptr;
    std::set_new_handler(nullptr);
}

// Under an address-space limit, a new fails until the handler frees the
// reserve, and its retry then succeeds.
static void test_handler_frees_reserve()
{
    struct rlimit saved;
    if (getrlimit(RLIMIT_AS, &saved) != 0) {
        std::perror("getrlimit");
        std::exit(99);
    }
    reserve = new char[opaque(96 << 20)];
    std::memset(reserve, 1, 96 << 20);
    unsigned long pages = 0;
    FILE *statm = std::fopen("/proc/self/statm", "r");
    if (!statm || std::fscanf(statm, "%lu", &pages) != 1) {
        std::perror("/proc/self/statm");
        std::exit(99);
    }
    std::fclose(statm);
    struct rlimit limit = saved;
    limit.rlim_cur = pages * 4096 + (64 << 20);
    if (setrlimit(RLIMIT_AS, &limit) != 0) {
        std::perror("setrlimit");
        std::exit(99);
    }
    handler_calls = 0;
    std::set_new_handler(free_reserve);
    char *block = nullptr;
    try {
        block = new char[opaque(80 << 20)];
    } catch (const std::bad_alloc &) {
    }
    setrlimit(RLIMIT_AS, &saved);
    CHECK(block && handler_calls == 1 && !reserve,
          "new of 80 MiB under a limit: block %p after %d handler calls", (void *)block,
          handler_calls);
    delete[] block;
    delete[] reserve;
    std::set_new_handler(nullptr);
}

static void test_aligned()
{
    struct alignas(256) Wide {
        char bytes[300];
    };
    Wide *one = new Wide;
    Wide *many = new Wide[3];
    CHECK(address_of(one) % 256 == 0 && address_of(many) % 256 == 0,
          "new of an alignas(256) type: %p and %p", (void *)one, (void *)many);
    delete one;
    delete[] many;
    for (std::size_t align = 16; align <= (1 << 21); align *= 8) {
        void *block = ::operator new(opaque(100), std::align_val_t(align));
        void *quiet = ::operator new[](opaque(5000), std::align_val_t(align), std::nothrow);
        CHECK(reinterpret_cast<std::uintptr_t>(block) % align == 0 &&
                  reinterpret_cast<std::uintptr_t>(quiet) % align == 0 && hak_node_of(block) >= 0 &&
                  hak_node_of(quiet) >= 0,
              "aligned new to %zu: %p and %p", align, block, quiet);
        ::operator delete(block, std::align_val_t(align));
        ::operator delete[](quiet, std::align_val_t(align), std::nothrow);
    }
}

// Each delete form frees: the thread's cache hands the block out again.
static void test_delete_forms()
{
    const std::size_t size = opaque(48);
    const std::align_val_t align{64};
    void *p;
#define REUSED(name, alloc, release)                                                               \
    do {                                                                                           \
        p = alloc;                                                                                 \
        std::uintptr_t freed = reinterpret_cast<std::uintptr_t>(p);                                \
        release;                                                                                   \
        p = alloc;                                                                                 \
        CHECK(reinterpret_cast<std::uintptr_t>(p) == freed,                                        \
              "%s did not free %#jx (the next new gave %p)", name, (std::uintmax_t)freed, p);      \
        release;                                                                                   \
    } while (0)
    REUSED("delete", ::operator new(size), ::operator delete(p));
    REUSED("delete[]", ::operator new[](size), ::operator delete[](p));
    REUSED("sized delete", ::operator new(size), ::operator delete(p, size));
    REUSED("sized delete[]", ::operator new[](size), ::operator delete[](p, size));
    REUSED("aligned delete", ::operator new(size, align), ::operator delete(p, align));
    REUSED("aligned delete[]", ::operator new[](size, align), ::operator delete[](p, align));
    REUSED("sized aligned delete", ::operator new(size, align), ::operator delete(p, size, align));
    REUSED("sized aligned delete[]", ::operator new[](size, align),
           ::operator delete[](p, size, align));
    REUSED("nothrow delete", ::operator new(size, std::nothrow),
           ::operator delete(p, std::nothrow));
    REUSED("nothrow delete[]", ::operator new[](size, std::nothrow),
           ::operator delete[](p, std::nothrow));
    REUSED("nothrow aligned delete", ::operator new(size, align, std::nothrow),
           ::operator delete(p, align, std::nothrow));
    REUSED("nothrow aligned delete[]", ::operator new[](size, align, std::nothrow),
           ::operator delete[](p, align, std::nothrow));
#undef REUSED
    ::operator delete(nullptr, size);
    ::operator delete[](nullptr);
}

// Until the address space runs out; 1 when it never does within 64 GiB.
static int exhaust()
{
    static char *blocks[1024];
    std::size_t count = 0;
    try {
        for (; count < 1024; count++) {
            blocks[count] = new char[opaque(64u << 20)];
            blocks[count][0] = 1;
        }
    } catch (const std::bad_alloc &) {
        std::printf("std::bad_alloc after %zu MiB\n", count * 64);
        for (std::size_t i = 0; i < count; i++)
            delete[] blocks[i];
        return 0;
    }
    std::printf("no std::bad_alloc within %zu MiB\n", count * 64);
    return 1;
}

// Pointers through a volatile, so that the compiler cannot see the misuse.
static char *volatile misused;

static int misuse(const char *mode)
{
    if (!std::strcmp(mode, "--double-delete")) {
        misused = new char[opaque(48)];
        delete[] misused;
        delete[] misused;
    } else {
        misused = new char[opaque(256)];
        char *volatile inside = misused + opaque(64);
        delete[] inside;
    }
    std::printf("%s was let through\n", mode);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !std::strcmp(argv[1], "--wrong-size")) {
        void *block = ::operator new(opaque(100));
        ::operator delete(block, opaque(2000));
        std::printf("a sized delete with the wrong size was let through\n");
        return 0;
    }
    if (argc > 1 && !std::strcmp(argv[1], "--wrong-alignment")) {
        // The size right, an alignment of 4 KiB the 64-byte aligned block
        // lacks (of two neighbours, one lacks it).
        std::align_val_t align{64};
        void *block = ::operator new(opaque(100), align);
        void *other = ::operator new(opaque(100), align);
        if (reinterpret_cast<std::uintptr_t>(block) % 4096 == 0)
            std::swap(block, other);
        ::operator delete(other, opaque(100), align);
        ::operator delete(block, opaque(100), std::align_val_t(opaque(4096)));
        std::printf("a sized delete with the wrong alignment was let through\n");
        return 0;
    }
    if (argc > 1 && !std::strcmp(argv[1], "--exhaust"))
        return exhaust();
    if (argc > 1 &&
        (!std::strcmp(argv[1], "--double-delete") || !std::strcmp(argv[1], "--interior-delete")))
        return misuse(argv[1]);
    test_resolution();
    test_bad_alloc();
    test_handler_then_throw();
    test_bad_alignment();
    test_handler_frees_reserve();
    test_aligned();
    test_delete_forms();
    if (failures) {
        std::fprintf(stderr, "test_cxx_operators: %d check(s) failed\n", failures);
        return 1;
    }
    std::printf("test_cxx_operators: all checks passed\n");
    return 0;
}
