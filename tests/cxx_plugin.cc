// A C++ plugin, opened by the C program cxx_plugin_host with dlopen's
// default RTLD_LOCAL: its libstdc++ comes after hakmem was loaded, in the
// plugin's own scope.  A new that fails must still throw std::bad_alloc.
#include <cstdint>
#include <new>

void *volatile plugin_sink;

extern "C" int plugin_new_throws(void)
{
    try {
        volatile std::size_t size = SIZE_MAX / 2;
        plugin_sink = new char[size]; // stored: the new is not elided
        return 0;
    } catch (const std::bad_alloc &) {
        return 1;
    }
}
