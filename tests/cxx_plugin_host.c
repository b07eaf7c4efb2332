/* A C program that dlopens a C++ plugin (cxx_plugin.so, named by its first
 * argument) after start-up; run with hakmem preloaded by
 * test_cxx_preload.sh.  Exits 0 when the plugin's failing new threw
 * std::bad_alloc. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s PLUGIN\n", argv[0]);
        return 2;
    }
    void *plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!plugin) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 2;
    }
    int (*new_throws)(void) = (int (*)(void))dlsym(plugin, "plugin_new_throws");
    if (!new_throws) {
        fprintf(stderr, "dlsym: %s\n", dlerror());
        return 2;
    }
    if (!new_throws()) {
        puts("the plugin's failing new returned");
        return 1;
    }
    puts("std::bad_alloc in the plugin");
    return 0;
}
