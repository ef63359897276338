#include <sqlite3.h>

/// SQLITE_TRANSIENT is a cast macro Swift cannot import: SQLite copies bound text at once.
static inline sqlite3_destructor_type upscale_sqlite_transient(void) { return SQLITE_TRANSIENT; }
