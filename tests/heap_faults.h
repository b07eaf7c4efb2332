/* What the heap-fault programs (heap_faults.c, heap_faults_cxx.cc) share:
 * how a case ends, which test_heap_faults.sh reads.  Each case commits one
 * fault against whatever allocator is in place, then carries on as a
 * program would.  The fault is caught when it does not go through: the
 * process dies of a signal, or the faulty call reports the error.
 */
#ifndef HAKMEM_TESTS_HEAP_FAULTS_H
#define HAKMEM_TESTS_HEAP_FAULTS_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Exit statuses; a death by signal means caught as well. */
#define FAULT_NOT_CAUGHT 0 /* the line after the fault was reached */
#define FAULT_REPORTED 3   /* the faulty call failed, as it must */
#define FAULT_NOT_APPLICABLE 98
#define FAULT_SETUP_ERROR 99

/* No stdio: it would allocate, and change which blocks a case gets. */
static inline void say(const char *text)
{
    if (write(STDERR_FILENO, text, strlen(text)) < 0) {
        _exit(FAULT_SETUP_ERROR);
    }
}

static inline void __attribute__((noreturn)) end_case(int status, const char *text)
{
    say(text);
    say("\n");
    _exit(status);
}

#endif
