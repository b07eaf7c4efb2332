/* Defaults for the sanitizer runtimes of the programs that link the
 * sanitizer build of hakmem; ASAN_OPTIONS and UBSAN_OPTIONS still override
 * them.  Leak checking is off: hakmem's blocks live in its own mappings,
 * which LeakSanitizer does not scan, and LeakSanitizer cannot run under
 * ptrace, as in some containers.  UBSan says where a report comes from. */
const char *__asan_default_options(void);
const char *__ubsan_default_options(void);

const char *__asan_default_options(void)
{
    return "detect_leaks=0";
}

const char *__ubsan_default_options(void)
{
    return "print_stacktrace=1:halt_on_error=1";
}
