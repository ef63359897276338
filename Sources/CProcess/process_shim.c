#include "process_shim.h"
#include <sys/prctl.h>
#include <signal.h>

int upscale_set_parent_death_signal(int sig) {
    return prctl(PR_SET_PDEATHSIG, (unsigned long)sig, 0, 0, 0);
}

#include <sys/vfs.h>

long upscale_filesystem_type(const char *path) {
    struct statfs info;
    if (statfs(path, &info) != 0) return -1;
    return (long)info.f_type;
}
