#ifndef UPSCALE_PROCESS_SHIM_H
#define UPSCALE_PROCESS_SHIM_H
#include <sys/types.h>

/// Asks the kernel to send `sig` to this process when its parent dies (prctl is variadic,
/// which Swift cannot call). Returns 0, or -1 with errno set.
int upscale_set_parent_death_signal(int sig);



/// The filesystem type number (statfs f_type) of `path`, or -1.
long upscale_filesystem_type(const char *path);
#endif
