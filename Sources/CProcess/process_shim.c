#define _GNU_SOURCE
#include "process_shim.h"
#include <sys/prctl.h>
#include <sched.h>
#include <signal.h>
#include <fcntl.h>

int upscale_set_parent_death_signal(int sig) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0, 0, 0);
}

#include <spawn.h>

int upscale_spawn_close_from(void *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, lowest);
}

#include <malloc.h>

int upscale_single_malloc_arena(void) {
    return mallopt(M_ARENA_MAX, 1);
}

int upscale_keep_freed_memory(void) {
    int threshold = mallopt(M_MMAP_THRESHOLD, 32 * 1024 * 1024);
    int trim = mallopt(M_TRIM_THRESHOLD, -1);
    return threshold == 1 && trim == 1;
}

void upscale_release_free_memory(void) {
    malloc_trim(0);
}

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int upscale_malloc_arena_count(void) {
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (out == NULL) return -1;
    int failed = malloc_info(0, out);
    fclose(out);
    int count = 0;
    for (const char *p = text; !failed && p != NULL && (p = strstr(p, "<heap nr=")) != NULL; p++) count++;
    free(text);
    return failed ? -1 : count;
}

#include <sys/vfs.h>

long upscale_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int upscale_zygote_start(upscale_zygote *zygote, int report_fd, const char *parent_variable,
                         char **arguments, size_t *length) {
    int request[2], report[2];
    if (pipe2(request, O_CLOEXEC) != 0) return -1;
    if (pipe2(report, O_CLOEXEC) != 0) {
        int saved = errno;
        close(request[0]);
        close(request[1]);
        errno = saved;
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int saved = errno;
        close(request[0]); close(request[1]); close(report[0]); close(report[1]);
        errno = saved;
        return -1;
    }
    if (pid > 0) {
        close(request[0]);
        close(report[1]);
        zygote->pid = pid;
        zygote->request = request[1];
        zygote->report = report[0];
        return 0;
    }
    // The copy.
    close(request[1]);
    close(report[0]);
    setpgid(0, 0);
    int defaults[] = {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGTRAP};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++) signal(defaults[i], SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    // A parent that dies while the copy waits closes the pipe: the read below ends it. Once
    // it runs the job, the job's own start (`JobProcess.followParent`) asks for SIGTERM on
    // the parent's death and checks `parent_variable`, as in a spawned child.
    size_t capacity = 4096, used = 0;
    char *buffer = malloc(capacity);
    if (buffer == NULL) _exit(1);
    for (;;) {
        if (used == capacity) {
            capacity *= 2;
            char *grown = realloc(buffer, capacity);
            if (grown == NULL) _exit(1);
            buffer = grown;
        }
        ssize_t n = read(request[0], buffer + used, capacity - used);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        used += (size_t)n;
    }
    close(request[0]);
    if (used == 0) _exit(0);
    if (report[1] != report_fd) {
        if (dup2(report[1], report_fd) < 0) _exit(1);
        close(report[1]);
    } else {
        int flags = fcntl(report_fd, F_GETFD);
        fcntl(report_fd, F_SETFD, flags & ~FD_CLOEXEC);
    }
    char pid_text[32];
    snprintf(pid_text, sizeof pid_text, "%d", (int)parent);
    setenv(parent_variable, pid_text, 1);
    *arguments = buffer;
    *length = used;
    return 1;
}

int upscale_set_batch_scheduling(pid_t thread) {
    struct sched_param parameters = { .sched_priority = 0 };
    return sched_setscheduler(thread, SCHED_BATCH, &parameters);
}
