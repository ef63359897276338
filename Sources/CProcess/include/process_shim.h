#ifndef UPSCALE_PROCESS_SHIM_H
#define UPSCALE_PROCESS_SHIM_H
#include <sys/types.h>

/// Asks the kernel to send `sig` to this process when its parent dies (prctl is variadic,
/// which Swift cannot call). Returns 0, or -1 with errno set.
int upscale_set_parent_death_signal(int sig);

/// Puts thread `thread` under SCHED_BATCH, nice value kept (SCHED_BATCH is a GNU name that
/// Swift's Glibc module does not import). Returns 0, or -1 with errno set.
int upscale_set_batch_scheduling(pid_t thread);



/// A copy of this process, made by fork() before the process starts any thread, that
/// waits to become a job's child process: it skips the dynamic loading and runtime start
/// a second exec would repeat (a tenth of a second with FFmpeg's and Swift's libraries).
typedef struct {
    pid_t pid;
    /// Parent's end of the pipe the job's arguments are written on (closing it unused ends the copy).
    int request;
    /// Parent's end of the child's report pipe (the child's descriptor `report_fd`).
    int report;
} upscale_zygote;

/// Forks the copy. In the parent: returns 0 and fills `zygote`, or -1 with errno set. In
/// the copy: returns 1 once the parent has written the job's arguments (NUL-terminated
/// strings, `*length` bytes in `*arguments`, malloc'd) and closed its end; by then the copy
/// is in a process group of its own, has default signal dispositions and an empty signal
/// mask, its report pipe on `report_fd` and `parent_variable` set to the parent's pid (the
/// job then follows its parent as a spawned child does). A copy whose parent closes the
/// pipe without writing, or dies first, exits at once.
int upscale_zygote_start(upscale_zygote *zygote, int report_fd, const char *parent_variable,
                         char **arguments, size_t *length);

/// Adds "close every descriptor from `lowest` up" to a spawn's file actions (glibc 2.34's
/// posix_spawn_file_actions_addclosefrom_np, a GNU name Swift's Glibc module does not
/// import). `actions` is a posix_spawn_file_actions_t. Returns 0 or an errno.
int upscale_spawn_close_from(void *actions, int lowest);

/// The filesystem type number (statfs f_type) of `path`, or -1.
long upscale_filesystem_type(const char *path);

/// Limits glibc's malloc to one arena (`mallopt(M_ARENA_MAX, 1)`; malloc.h is not part of
/// Swift's Glibc module). Call it before a second thread exists. Returns 1, or 0 where
/// malloc refused it.
int upscale_single_malloc_arena(void);

/// Keeps what malloc frees for the next allocation instead of giving it back to the kernel:
/// blocks under 32 MB (the ceiling of glibc's sliding mmap threshold) come from the heap, whose top is never
/// trimmed (`M_MMAP_THRESHOLD`, `M_TRIM_THRESHOLD` -1). Returns 1, or 0 where malloc refused.
int upscale_keep_freed_memory(void);

/// Gives the heap's free pages back to the kernel (`malloc_trim(0)`).
void upscale_release_free_memory(void);

/// The number of malloc arenas this process has made (the heaps `malloc_info` lists), or -1.
int upscale_malloc_arena_count(void);
#endif
