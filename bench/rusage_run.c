/* rusage_run: runs a command and writes its exit status, wall time and
 * rusage to a file, for tools/hakmem-compare.
 *
 * Linux carries a process's peak RSS across exec, so a program forked
 * straight from the comparison tool's Python interpreter would count the
 * interpreter's resident memory as its own peak.  Forked from this small
 * process instead, its ru_maxrss (and the getrusage figures a bench program
 * prints) reflect the program itself.
 *
 * usage: rusage_run [-p LIBRARY] RESULT_FILE COMMAND [ARG...]
 * -p preloads LIBRARY into COMMAND only; without it LD_PRELOAD is cleared.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_seconds(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double timeval_seconds(struct timeval tv)
{
    return (double)tv.tv_sec + (double)tv.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    const char *preload = NULL;
    int first = 1;

    if (argc > 2 && strcmp(argv[1], "-p") == 0) {
        preload = argv[2];
        first = 3;
    }
    if (argc - first < 2) {
        fprintf(stderr, "usage: %s [-p LIBRARY] RESULT_FILE COMMAND [ARG...]\n", argv[0]);
        return 2;
    }
    const char *result_path = argv[first];
    char **command = &argv[first + 1];

    FILE *result = fopen(result_path, "we");
    if (result == NULL) {
        perror(result_path);
        return 2;
    }

    double start = now_seconds();
    pid_t child = fork();
    if (child < 0) {
        perror("fork");
        return 2;
    }
    if (child == 0) {
        if (preload != NULL)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        execvp(command[0], command);
        fprintf(stderr, "%s: cannot run %s: %m\n", argv[0], command[0]);
        _exit(127);
    }

    int status;
    struct rusage usage;
    if (wait4(child, &status, 0, &usage) < 0) {
        perror("wait4");
        return 2;
    }
    double wall = now_seconds() - start;

    int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    fprintf(result,
            "exit=%d signal=%d core=%d wall_s=%.6f user_s=%.6f sys_s=%.6f minflt=%ld "
            "majflt=%ld maxrss_kb=%ld\n",
            WIFEXITED(status) ? WEXITSTATUS(status) : -1,
            WIFSIGNALED(status) ? WTERMSIG(status) : 0,
            WIFSIGNALED(status) && WCOREDUMP(status) ? 1 : 0, wall, timeval_seconds(usage.ru_utime),
            timeval_seconds(usage.ru_stime), usage.ru_minflt, usage.ru_majflt, usage.ru_maxrss);
    if (fclose(result) != 0) {
        perror(result_path);
        return 2;
    }
    return exit_code;
}
