/* The one way hakmem stops a process: a message on stderr, then abort.  In
 * the base layer beside print.c, so that every layer can report a fault
 * without reaching up into start-up code. */
#ifndef HAK_FAULT_H
#define HAK_FAULT_H

/* Aborts with "hakmem: WHAT ADDR (NOTE)"; addr and note may be NULL. */
void hak_fatal_note(const char *what, const void *addr, const char *note)
    __attribute__((noreturn, cold));
void hak_fatal(const char *what, const void *addr) __attribute__((noreturn, cold));

#endif
