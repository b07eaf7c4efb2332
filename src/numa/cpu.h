/* The CPU the calling thread runs on, without a system call where glibc
 * registered rseq for the thread (glibc 2.35 on): the kernel keeps the
 * thread's rseq area up to date on every migration. */
#ifndef HAK_CPU_H
#define HAK_CPU_H

#include <sched.h>
#include <stddef.h>
#include <stdint.h>

/* Weak, so that the library still loads with a glibc older than 2.35: the
 * addresses then read as null. */
extern const ptrdiff_t __rseq_offset __attribute__((weak));
extern const unsigned int __rseq_size __attribute__((weak));

/* cpu_id in the kernel's struct rseq, after the 32-bit cpu_id_start. */
#define HAK_RSEQ_CPU_ID_OFFSET 4

/* The word the kernel rewrites with the thread's CPU whenever it moves the
 * thread, or NULL where glibc did not register rseq: __rseq_size is 0 when
 * registration failed or was turned off (GLIBC_TUNABLES=glibc.pthread.rseq=0). */
static inline const volatile int32_t *hak_numa_rseq_cpu_word(void)
{
    if (!&__rseq_size || !__rseq_size)
        return NULL;
    const char *area = (const char *)__builtin_thread_pointer() + __rseq_offset;
    return (const volatile int32_t *)(area + HAK_RSEQ_CPU_ID_OFFSET);
}

static inline unsigned hak_numa_current_cpu(void)
{
    const volatile int32_t *word = hak_numa_rseq_cpu_word();
    int32_t cpu = word ? *word : -1;
    if (cpu >= 0)
        return (unsigned)cpu;
    cpu = sched_getcpu();
    return cpu < 0 ? 0 : (unsigned)cpu;
}

#endif
